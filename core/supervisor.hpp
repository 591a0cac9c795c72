#pragma once

#include "core/exit_status.hpp"
#include "core/plan.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <sys/types.h>
#include <vector>

namespace air {

/// How one rank ended.
struct RankOutcome {
  int rank = 0;
  int local_rank = 0;
  pid_t pid = -1;
  ExitStatus status;
  bool stopped_by_air_run = false; ///< air-run signalled it during teardown before it ended
  bool oom_killed = false;         ///< killed by the kernel's OOM killer (cgroup memory.events)
  std::string spawn_error;         ///< non-empty when exec failed (then status is 126/127)
  std::string log_error;           ///< non-empty when writing its log file failed ("write ...: ...")
  double duration_s = 0;
  double user_s = 0;
  double sys_s = 0;
  long max_rss_kb = 0;
  std::uint64_t end_order = 0;     ///< order in which air-run observed the exits (1 = first)
  std::chrono::steady_clock::time_point ended_at{};
  std::deque<std::string> tail;    ///< last `tail_lines` output lines (stdout and stderr)
};

/// How the whole run ended.
struct RunOutcome {
  enum class Status { succeeded, failed, timed_out, interrupted, launch_failed };
  Status status = Status::succeeded;
  int interrupt_signal = 0;  ///< for interrupted
  int root_cause_rank = -1;  ///< first rank that failed by air-run's clock, -1 if none
  std::string reason;        ///< one line: "rank 1 exited with exit code 3"
  std::vector<RankOutcome> ranks; ///< in rank order
  std::chrono::system_clock::time_point started_at{};
  std::chrono::system_clock::time_point ended_at{};
  double duration_s = 0;
  std::uint64_t console_lines_dropped = 0;

  /// air-run's exit code per the DESIGN table: 0, rank's code / 128+N, 124, 126/127, 128+N.
  int exit_code() const;
};

/// Where console output goes. `--json` sends rank stdout to fd 2 so fd 1 stays parseable.
struct ConsoleOptions {
  int stdout_fd = 1;
  int stderr_fd = 2;
  bool prefix = true;
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
RunOutcome supervise(const LaunchPlan& plan, const ConsoleOptions& console);

} // namespace air
