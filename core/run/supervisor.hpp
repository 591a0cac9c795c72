#pragma once

#include "core/run/job_hang.hpp"
#include "core/run/job_preemption.hpp"
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

/// Events from outside this node's ranks that the supervisor's loop waits on
/// together with them, ninja-style: today the multi-node control connection
/// (core/cluster/control.hpp). All calls happen on the supervisor's thread.
class SupervisorHooks {
public:
  virtual ~SupervisorHooks() = default;
  /// Descriptors to poll for input in the next iteration.
  virtual std::vector<int> poll_fds() const = 0;
  /// When `check` must run even if no descriptor is ready (heartbeats); nullopt: never.
  virtual std::optional<std::chrono::steady_clock::time_point> next_deadline() const = 0;
  /// Runs after every wake-up, before exits are judged: reads what is ready
  /// and sends what is due. A value stops the run because of another node:
  /// the usual teardown follows, and the outcome carries it as remote_failure.
  virtual std::optional<RemoteFailure> check(std::chrono::steady_clock::time_point now) = 0;
  /// Called once, as soon as this node's own run has failed, timed out, been
  /// interrupted or could not launch (never for a remote failure), so the
  /// other nodes can be told before this node's grace period even starts.
  virtual void local_failure(const RunOutcome& outcome) = 0;

  // Hang diagnosis across nodes (docs/hangs.md, "Several nodes"). The
  // defaults are one node's: its own diagnosis is the run's.

  /// Whether node 0's agent names the job's laggards and decides whether the
  /// run stops: then this node's own diagnosis only goes to its log and
  /// summary, and to node 0.
  virtual bool job_wide_hangs() const { return false; }
  /// This node's ranks made no progress for --hang-timeout (its diagnosis begins).
  virtual void ranks_quiet() {}
  /// Whether the job asked for this node's ranks' places since the last call:
  /// the supervisor answers with ranks_placed, diagnosing at once if it must.
  virtual bool places_asked() { return false; }
  /// This node's ranks' places, from its latest diagnosis.
  virtual void ranks_placed(const std::vector<HangRank>& ranks) { (void)ranks; }
  /// Node 0: the job's places, once every node answered or the wait for them
  /// ended; nullopt meanwhile, and on the other nodes.
  virtual std::optional<JobPlaces> job_places(std::chrono::steady_clock::time_point now) {
    (void)now;
    return std::nullopt;
  }

  // Preemption across nodes (docs/preemption.md, "Several nodes"). The
  // defaults are one node's: it picks its own stop step.

  /// Whether node 0 picks one stop step for the whole job: then a
  /// preemption signal here goes to node 0 (preempt_signalled) and this node
  /// stops at the step job_stop hands back.
  virtual bool job_wide_preemption() const { return false; }
  /// A preemption signal reached this node while `mine.polling` of its ranks
  /// call air.should_stop(); `grace` is the time they have from now.
  virtual void preempt_signalled(int sig, const NodeSteps& mine, std::chrono::milliseconds grace) {
    (void)sig, (void)mine, (void)grace;
  }
  /// Whether node 0 asked for this node's step counts since the last call:
  /// the supervisor answers with ranks_counted.
  virtual bool counts_asked() { return false; }
  /// This node's polling ranks' counts, just read.
  virtual void ranks_counted(const NodeSteps& mine) { (void)mine; }
  /// The job's stop step once node 0 decided it (on every node, node 0's
  /// included), handed over once; nullopt meanwhile.
  virtual std::optional<JobStop> job_stop(std::chrono::steady_clock::time_point now) {
    (void)now;
    return std::nullopt;
  }
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
/// core/run/warm_start.hpp); Python ranks it accepts are forked from it, the
/// others, and all of them when it failed, start fresh.
RunOutcome supervise(const LaunchPlan& plan, const ConsoleOptions& console, SupervisorHooks* hooks = nullptr,
                     WarmStart* warm = nullptr);

} // namespace air
