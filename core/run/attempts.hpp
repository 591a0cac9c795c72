#pragma once

#include "core/run/outcome.hpp"
#include "core/run/plan.hpp"
#include "core/run/supervisor.hpp"

#include <chrono>
#include <optional>

namespace air {

/// What decides and prepares restarts, outside the attempt loop: on one node
/// a free port; on several, the agreement through the control connection.
class AttemptHooks {
public:
  virtual ~AttemptHooks() = default;
  /// After an attempt ended (`outcome`, which the hook may amend, e.g. with
  /// another node's failure): the master port of attempt `next`, or nullopt
  /// to end the run with `outcome`. `restartable` is this node's own view
  /// (restartable_outcome); called only while restarts are left.
  virtual std::optional<int> next_attempt(RunOutcome& outcome, int next, bool restartable) = 0;
  /// Fills what the loop cannot know from `outcome` (the root cause's error
  /// file headline) before the attempt's files are cleared.
  virtual void record_attempt(const LaunchPlan& plan, const RunOutcome& outcome, AttemptRecord& record) = 0;
  /// After next_attempt agreed on a restart: the first attempt's plan as the
  /// next attempt must start from when the nodes changed (a node lost: a new
  /// node rank, node count and world size), or nullopt when they did not.
  virtual std::optional<LaunchPlan> regroup(const LaunchPlan& first) {
    (void)first;
    return std::nullopt;
  }
};

/// Whether a group that ended this way may be restarted: only after a rank
/// failed (here or on another node); never after Ctrl-C, SIGTERM, SIGHUP, a
/// timeout or a launch failure.
bool restartable_outcome(const RunOutcome& outcome);

/// The plan of attempt `attempt` (0-based) from the first attempt's plan:
/// TORCHELASTIC_RESTART_COUNT, the attempt's MASTER_PORT, per-attempt log
/// files (rankR.attemptN.log; attempt 0 keeps rankR.log; torchrun's -r/-t
/// files and error file move from attempt_0/ to attempt_N/), and `timeout` as
/// what is left of the whole run's. Pure.
LaunchPlan plan_for_attempt(const LaunchPlan& first, int attempt, int master_port,
                            std::optional<std::chrono::milliseconds> timeout_left);

/// The attempt's record, from its outcome. Pure.
AttemptRecord attempt_record(const LaunchPlan& plan, const RunOutcome& outcome);

/// Runs the worker group, and again after a failure up to plan.max_restarts
/// times (torchrun's --max-restarts), and again without limit when node 0
/// ended an attempt to admit a node that joined (RemoteFailure::
/// membership_change: not a failure, not counted, as in torchrun). The first
/// attempt is plan.attempt (0, or the attempt a node that joined a running
/// job starts in). Every attempt is one `supervise` call
/// with a fresh master port, the timeout counts from the first attempt, an
/// interrupt queued between attempts ends the run there. Returns the last
/// attempt's outcome with every attempt in `attempts` and
/// started_at/duration_s over the whole run. `plan` ends as the last
/// attempt's plan (its log paths are the reports'). With max_restarts 0 this
/// is exactly one `supervise` call.
RunOutcome run_attempts(LaunchPlan& plan, const ConsoleOptions& console, SupervisorHooks* supervisor_hooks,
                        AttemptHooks& attempt_hooks);

} // namespace air
