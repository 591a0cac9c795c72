#pragma once

#include <string>
#include <string_view>
#include <vector>

// Stacks of stuck ranks. A rank that hangs (a collective waiting for a peer
// that never comes) says nothing about where it is; the question every hung
// job asks is "which line is each rank on". air-run answers it for Python
// ranks without any change to user code: it puts a directory holding one
// sitecustomize.py first on the rank's PYTHONPATH; at start-up that file arms
// faulthandler on a spare real-time signal, writing every thread's stack to a
// per-rank file, then runs the sitecustomize it shadows (if any). On a
// timeout, or when air-run gets SIGQUIT (Ctrl-\), the supervisor sends that
// signal to each armed rank, waits briefly for the dumps and reads them.
//
// A real-time signal rather than SIGUSR1/SIGUSR2: those are forwarded to the
// ranks as the scheduler's warnings (Slurm --signal) and may have handlers in
// user code. Only a rank's leader process arms it (children such as
// DataLoader workers inherit the environment but are not group leaders), and
// air-run signals only ranks whose stack file exists, that is, ranks that
// armed the handler: an unarmed process would be killed by the signal.

namespace air {

/// Environment variables the shim reads.
inline constexpr std::string_view k_stack_file_var = "AIR_RUN_STACK_FILE";
inline constexpr std::string_view k_stack_signal_var = "AIR_RUN_STACK_SIGNAL";

/// The file name of the shim inside its directory: the loader, which every
/// Python on the rank's path reads, Python 2 included.
inline constexpr std::string_view k_stack_shim_name = "sitecustomize.py";

/// The file the loader imports on Python 3 only: the shim itself
/// (stack_shim_source), which is Python 3.
inline constexpr std::string_view k_stack_shim_body_name = "air_run_shim.py";

/// A part of the shim that a layer above run/ owns, such as the MLflow run's
/// wait (core/mlflow/rank_wait.hpp): run/ cannot include it, so the caller
/// hands it in. `source` defines functions only; `start` is the statement
/// that starts the part in the rank.
struct ShimPart {
  std::string_view source;
  std::string_view start;
};

/// The Python source of the shim, assembled from the .py files built into
/// the binary (core/run/python/, docs/development.md "The ranks' Python"):
/// stacks, the progress page's slots, progress, patches, then `later`'s
/// sources, then the start, which arms the stacks, attaches the progress
/// page, starts `later`'s parts in their order and runs the shadowed
/// sitecustomize last. Pure.
std::string stack_shim_source(const std::vector<ShimPart>& later = {});

/// The sitecustomize.py that loads the shim: valid Python 2 and 3, it imports
/// k_stack_shim_body_name on Python 3 and does nothing else. A Python 2
/// helper a rank starts (an old build script) reads it too, and printed
/// "'import sitecustomize' failed" when the shim was this file. Pure.
std::string_view stack_shim_loader_source();

} // namespace air
