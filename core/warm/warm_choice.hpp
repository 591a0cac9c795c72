#pragma once

#include "core/base/environment.hpp"
#include "core/spec/spec.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Whether a run's ranks fork from the warm interpreter (--preload,
// core/warm/warm_start.hpp), which modules it imports, and whether the first
// attempt waits for it. The default, `auto`, turns the warm start on only
// where it cannot make a launch slower:
//
// - the target is a Python program (`python [-u] script` or `-m module`
//   under the run's interpreter) that imports torch, itself or through a
//   library built on it; the interpreter imports torch and nothing else;
// - restarts (which fork from it) are possible, or the first start gains
//   from it too;
// - the first attempt forks from it only when this node runs at least as many
//   ranks as air-run has CPUs: then fresh interpreters would queue for the
//   CPUs to import torch side by side, and one import plus forks is sooner.
//   With CPUs to spare, the first attempt's ranks start fresh at once and the
//   interpreter imports beside them, ready for the restarts.
//
// A list of modules (`--preload torch`) is the user's choice: every attempt
// forks, the first one included. `none` (`--no-preload`) turns it off.

namespace air {

/// How the warm start applies to one run.
struct WarmChoice {
  std::vector<std::string> modules; ///< what the interpreter imports; empty: no warm start
  bool first_attempt = false;       ///< the first attempt forks too (else only restarts)
  std::string why;                  ///< one line for --dry-run and the notices
  /// Why every rank starts fresh although the warm start was asked for (or
  /// chosen): the target sets, before it imports torch, a variable torch
  /// reads at import. "" otherwise. The summary's ranks[].fresh_reason.
  std::string fresh_reason;
};

/// Whether the ranks run the target under spec.python (a `.py` script or
/// `-m module`), and so run air-run's start-up shim (core/run/stacks.hpp)
/// and may fork warm. Pure.
bool runs_python_target(const LaunchSpec& spec);

/// Whether `preload` is `auto`, air-run's choice (as settled: the default). Pure.
bool preload_is_auto(const LaunchSpec& spec);

/// The first statement of `source` that imports torch or a library that
/// imports it (transformers, lightning, accelerate, deepspeed, ...), as
/// written (trimmed), with its line number: "line 3: import torch". nullopt
/// when none. A plain scan of the lines, so an import inside a function, a
/// `try:` or an `if` counts (the program would import it), one in a comment
/// does not. Pure.
std::optional<std::string> torch_import_in(std::string_view source);

/// The first line of `source`, before its first import of torch (all of it
/// when it has none), that names in a string literal a variable torch or
/// the libraries it loads read when torch is imported (OMP_*, KMP_*,
/// GOMP_*, MKL_*, OPENBLAS_*, PYTORCH_*, TORCH_*), when the source touches
/// the environment there (`environ`, `putenv`): "line 2:
/// os.environ["OMP_NUM_THREADS"] = "2"". A rank forked from an interpreter
/// that imported torch already would not see such a setting honoured, as a
/// fresh one does. Conservative (a read counts as well as a write), and
/// blind to a setting made by another module first. nullopt when none. Pure.
std::optional<std::string> import_time_setting_in(std::string_view source);

/// import_time_setting_in applied to the file the ranks run (as
/// find_torch_import finds it), prefixed with its name: "train.py line 2:
/// ...". nullopt when none or the file cannot be read.
std::optional<std::string> find_import_time_setting(const LaunchSpec& spec, const Environment& env);

/// The first torch package (k_torch_packages) that AIR_RUN_TARGET_MODULES in
/// `env` lists: "uses torch (AIR_RUN_TARGET_MODULES)". The variable holds the
/// top-level packages the target uses, comma-separated, as told by the
/// program that starts air-run: the `air` package sets it for @distributed
/// and TorchDistributor functions, whose ranks run its worker module, which
/// imports no torch itself. nullopt when unset or none is a torch package. Pure.
std::optional<std::string> torch_in_target_modules(const Environment& env);

/// torch_import_in applied to the file the ranks run: the script, or for
/// `-m module` the module's file under the working directory or a
/// PYTHONPATH entry of `env` (an installed module is not looked for); when
/// that shows none, torch_in_target_modules(env). nullopt when neither
/// shows torch or the file cannot be read (no warm start then).
std::optional<std::string> find_torch_import(const LaunchSpec& spec, const Environment& env);

/// The CPUs air-run may run on (its affinity mask); 1 when unknown.
int usable_cpu_count();

/// Decides the warm start for a run of `ranks_on_node` ranks on a node where
/// air-run has `cpus` CPUs, the target's torch import being `torch_import`
/// (find_torch_import), and what it sets before that import
/// (find_import_time_setting), which turns the warm start off. Pure.
WarmChoice choose_warm_start(const LaunchSpec& spec, int ranks_on_node, int cpus,
                             const std::optional<std::string>& torch_import,
                             const std::optional<std::string>& import_time_setting = std::nullopt);

} // namespace air
