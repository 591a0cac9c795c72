#pragma once

#include "core/run/job_events.hpp"
#include "core/run/live_view.hpp"
#include "core/run/outcome.hpp"
#include "core/run/plan.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air {

class WarmStart;

/// Where console output goes. `--json` sends rank stdout to fd 2 so fd 1 stays parseable.
struct ConsoleOptions {
  int stdout_fd = 1;
  int stderr_fd = 2;
  bool prefix = true;
  /// Colour the rank prefixes on each stream (core/run/console_style.hpp).
  bool stdout_color = false;
  bool stderr_color = false;
  /// The live status area under the rank output on stderr (core/run/live_view.hpp):
  /// the caller decides (live_view_wanted); the GPUs it reports on, read through
  /// NVML when `live_nvml`.
  bool live = false;
  std::vector<LiveGpuSource> live_gpus;
  bool live_nvml = false;
  /// The rank (on this node) that gets air-run's stdin, forwarded through a
  /// pipe by the loop (breakpoint(), pdb); its unfinished lines (prompts) are
  /// shown as they come. The others read /dev/null. -1: none.
  int stdin_rank = -1;
  /// -q: no notices of air-run's own while the ranks run (the teardown's).
  bool quiet = false;
  /// --timestamps: each rank line on the console starts with the wall-clock time.
  bool timestamps = false;
  /// Give each rank a pseudo-terminal for its stdout (stderr) when that
  /// stream reaches the console, so isatty() holds in the rank: set when
  /// air-run's own stdout (stderr) is a terminal, outside CI. The ranks'
  /// unfinished lines (progress bars drawn with '\r') are then shown live
  /// under the output, on stderr's terminal (core/run/live_view.hpp), and
  /// their finished lines as the terminal left them (core/run/terminal_line.hpp).
  bool stdout_tty = false;
  bool stderr_tty = false;
};

/// Spawns every rank of the plan and supervises them in one single-threaded
/// event loop (pipes, signalfd, deadlines): first failure tears down the rest
/// (SIGTERM to every group, one grace deadline, SIGKILL), timeout tears down
/// with status timed_out, SIGINT/SIGTERM/SIGHUP are forwarded then tear down.
/// Returns when every rank is reaped and its pipes are drained. Never throws;
/// a rank that cannot be exec'd is reported in its RankOutcome.
///
/// Call it from a single-threaded process: the signal mask it installs and
/// each rank's parent-death signal are tied to the calling thread. It blocks
/// the supervised signals and ignores SIGPIPE while it runs, and restores
/// both before returning.
///
/// `hooks` (optional, not owned) adds external events to the loop; see SupervisorHooks.
///
/// `warm` (optional, not owned): the run's warm interpreter (--preload,
/// core/warm/warm_start.hpp); Python ranks it accepts are forked from it, the
/// others, and all of them when it failed, start fresh.
RunOutcome supervise(const LaunchPlan& plan, const ConsoleOptions& console, SupervisorHooks* hooks = nullptr,
                     WarmStart* warm = nullptr);

} // namespace air
