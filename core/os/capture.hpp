#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/base/exit_status.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// How a helper program run by `run_captured` ended, with everything it wrote.
struct CapturedRun {
  ExitStatus status;
  bool timed_out = false; ///< air-run killed it at the deadline (status then says SIGKILL)
  bool stopped = false;   ///< `stop_fd` became readable and air-run stopped it
  std::string out;        ///< its stdout, up to the capture limit
  std::string err;        ///< its stderr, up to the capture limit
  double duration_s = 0;
};

/// What `run_captured` does besides waiting: a deadline, how much output to
/// keep, a callback that sees the output as it arrives, and a descriptor that
/// asks for the helper to be stopped.
struct CaptureOptions {
  /// At the deadline the whole process group gets SIGKILL; nullopt: no deadline.
  std::optional<std::chrono::milliseconds> timeout;
  /// Kept of each stream; the rest is read and dropped so the child never
  /// blocks on a full pipe.
  std::size_t max_bytes = 1 << 20;
  /// Called with every chunk read, in arrival order, with the stream it came
  /// from (a pip build streams its output to a log this way).
  std::function<void(std::string_view chunk, bool from_stderr)> on_output;
  /// When this descriptor (a signalfd, typically) becomes readable, the
  /// helper's group gets SIGTERM, then SIGKILL after `stop_grace`, and the
  /// run ends with `stopped` set. The descriptor is not read: the caller
  /// learns from it why. -1: none.
  int stop_fd = -1;
  std::chrono::milliseconds stop_grace{3000};
  /// Called about every `tick_interval` while the helper runs, whether or not
  /// it writes anything (a live status line keeps its clock going this way).
  std::function<void()> on_tick;
  std::chrono::milliseconds tick_interval{1000};
};

/// The one runner for helper programs (the preflight's air-nccl-check, the
/// interpreter probe, venv and pip, Slurm's scontrol). It starts `argv` with
/// `env` through spawn_process (own process group, stdin from /dev/null,
/// every other fd closed, death signal if air-run dies, exec errors reported
/// rather than guessed from exit 127), collects stdout and stderr, and waits
/// for it. Errors are spawn_process's (not found 127, not executable 126,
/// system 125); how the helper itself ended is in the result.
Expected<CapturedRun> run_captured(const std::vector<std::string>& argv, const Environment& env,
                                   const CaptureOptions& options);

/// run_captured with a deadline and the default capture limit.
Expected<CapturedRun> run_captured(const std::vector<std::string>& argv, const Environment& env,
                                   std::chrono::milliseconds timeout, std::size_t max_bytes = 1 << 20);

} // namespace air
