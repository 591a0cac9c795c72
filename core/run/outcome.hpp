#pragma once

#include "core/base/exit_status.hpp"
#include "core/hang/diagnosis.hpp"
#include "core/run/timeline.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The vocabulary of how a run ended, apart from the loop that produces it
// (core/run/supervisor.hpp), so that the pure renderers of reports use it
// without depending on the process layer.

namespace air {

/// How one rank ended.
struct RankOutcome {
  int rank = 0;
  int local_rank = 0;
  int pid = -1; ///< a pid_t; plain int keeps this header free of system headers
  ExitStatus status;
  /// air-run's teardown signal ended it (ended_by_teardown_signal): a rank
  /// that exited with its own code while the teardown ran is not stopped.
  bool stopped_by_air_run = false;
  /// The OOM killer killed it, or a child of it (a DataLoader worker) before
  /// it failed (the cgroup's oom_kill counter rose: memory.events).
  bool oom_killed = false;
  std::string spawn_error; ///< non-empty when exec failed (then status is 126/127)
  bool warm = false;       ///< forked from the warm interpreter (--preload, core/warm/warm_start.hpp)
  std::string log_error;   ///< non-empty when writing its log file failed ("write ...: ...")
  double duration_s = 0;
  double user_s = 0;
  double sys_s = 0;
  long max_rss_kb = 0;
  std::uint64_t end_order = 0; ///< order in which air-run observed the exits (1 = first)
  std::chrono::steady_clock::time_point ended_at{};
  std::deque<std::string> tail; ///< last `tail_lines` output lines (stdout and stderr)
  /// It ignored SIGTERM for the whole grace period (or a second Ctrl-C came
  /// first) and air-run sent SIGKILL while it was still running.
  bool killed = false;
  /// When its last output line arrived; nullopt if it printed nothing.
  std::optional<std::chrono::steady_clock::time_point> last_output_at;
  /// Seconds between its last output line and the moment its stack was taken
  /// (or the run ended); < 0 when it printed nothing.
  double last_output_age_s = -1;
  /// Every thread's Python stack, as faulthandler printed it on a timeout
  /// (core/run/stacks.hpp); "" when none was taken.
  std::string stack;
  /// Training steps its shim counted (core/run/progress.hpp); nullopt when
  /// it counted nothing (not a Python rank, or the shim did not attach).
  std::optional<std::uint64_t> steps;
};

/// What a hang's diagnosis found (--hang-timeout), while the run was alive.
struct HangReport {
  double quiet_s = 0;                         ///< how long no rank had made progress (a step or a line)
  std::chrono::system_clock::time_point at{}; ///< when the diagnosis was made
  HangDiagnosis diagnosis;
  std::vector<HangRank> ranks; ///< each rank's place, in rank order
  /// Flight Recorder dumps the ranks wrote (NCCL process groups only).
  std::vector<std::string> flight_recorder_files;
};

/// How a preemption stop went (SIGTERM or a handled signal, air.should_stop()).
struct PreemptionReport {
  int signal = 0;
  std::uint64_t stop_step = 0;      ///< the step every polling rank was asked to stop at; 0: at once
  std::vector<int> polling_ranks;   ///< ranks that called air.should_stop() and were asked to stop
  std::vector<int> signalled_ranks; ///< ranks that never asked, sent the signal at once
  double deadline_s = 0;            ///< the grace period they had
  /// The newest complete checkpoint in --checkpoint-dir once the ranks had
  /// stopped (what a new launch resumes from); "" = none, or no directory.
  std::string checkpoint;
  /// Across nodes: the step is the job's, picked by node 0 (docs/preemption.md).
  bool job_wide = false;
  int signal_node = -1;           ///< job_wide: the node the signal reached first
  std::vector<int> missing_nodes; ///< job_wide, on node 0: nodes whose step counts did not come in time
  /// Node 0, across nodes, once every node's ranks ended: the other nodes
  /// whose asked ranks did not all stop at the step, or that did not say so
  /// before node 0's wait ended (ControlChannel's `stopped`).
  std::vector<int> unsaved_nodes;
  /// Node 0 did not answer in time: the step is this node's own.
  bool fallback = false;
  /// Once the ranks ended: those of polling_ranks that stopped at the stop
  /// step (stopped_at_stop_step). The others ended otherwise, and their
  /// RankOutcome says how: a signal air-run did not send (a scheduler that
  /// signals every process), an error, SIGKILL after the grace period.
  std::vector<int> stopped_ranks;
  /// What the signal meant, where air-run can tell: "time_limit" (a SIGTERM
  /// at or after Slurm's SLURM_JOB_END_TIME), "time_limit_warning" (SIGUSR1
  /// or SIGUSR2 before it: --signal=USR1@N); "" otherwise.
  std::string cause;
  /// Node 0 under Slurm, after a warning every asked rank stopped for: ""
  /// (not asked), "requeued" (`scontrol requeue` took it), or why it failed.
  std::string requeue;
};

/// Whether rank `r`, asked to stop at `stop_step` (0: at its next
/// air.should_stop()), stopped there: it exited 0 having counted that many
/// steps. Pure.
bool stopped_at_stop_step(const RankOutcome& r, std::uint64_t stop_step);

/// Whether a rank that air-run signalled (`sent_signal`: SIGTERM, SIGINT or
/// SIGHUP during a teardown, SIGKILL after the grace period) ended because of
/// that signal: it died of it or of SIGKILL, exited with the shell's 128+N for
/// either (a wrapper script whose child died of it), or exited 0 (it caught the
/// signal and shut down cleanly). Any other exit code is the rank's own
/// failure, even when the signal had already gone out: a rank that exits 1 in
/// the same instant as the teardown began failed, and says so. Pure.
bool ended_by_teardown_signal(const ExitStatus& status, int sent_signal);

/// Another node's failure that stopped this node's run (multi-node runs).
struct RemoteFailure {
  int node_rank = -1;
  std::string node_name;
  int rank = -1;      ///< global rank of the root cause there, -1 when no rank failed (agent lost, interrupt)
  int exit_code = 1;  ///< that node's exit code, which this node exits with too
  std::string reason; ///< that node's one-line reason ("rank 3 exited with exit code 5")
  /// Not a failure: node 0 ended the attempt because a node is waiting to
  /// join (c10d --nnodes MIN:MAX), so the group restarts with it. Such a
  /// restart does not count against --max-restarts, as in torchrun.
  bool membership_change = false;
  /// Node 0 found the whole job hung (--on-hang stop): this node ends as hung too.
  bool hung = false;
};

/// "stopped because node 1 (node2) failed: rank 3 exited with exit code 5";
/// for a membership change "stopped for a membership change: node3 joined, ...";
/// for a hang: "stopped because node 0 (node1) found the job hung: ...".
std::string remote_failure_reason(const RemoteFailure& failure);

/// One attempt of a run that was restarted (--max-restarts): how the
/// worker group ended before the next one started.
struct AttemptRecord {
  int attempt = 0;          ///< 0-based: TORCHELASTIC_RESTART_COUNT during it
  int exit_code = 0;        ///< the failing rank's code (or the failing node's)
  int root_cause_rank = -1; ///< global rank, -1 when another node's failure ended it
  std::string reason;       ///< the attempt's one line, as a run's `reason`
  /// How it ended: a run status's name ("failed", "interrupted"...), or
  /// "membership_change" when node 0 ended it to admit a waiting node.
  std::string status;
  std::string error; ///< the root cause's error file headline ("ValueError: bad batch"), "" if none
  std::optional<RemoteFailure> remote_failure;
  int master_port = 0;
  std::string resumed_from;       ///< the checkpoint its ranks got in AIR_RESUME_FROM, "" = none
  std::vector<std::string> nodes; ///< the attempt's nodes by node rank (their names)
  std::chrono::system_clock::time_point started_at{};
  std::chrono::system_clock::time_point ended_at{};
  double duration_s = 0;
};

/// How the whole run ended.
struct RunOutcome {
  enum class Status { succeeded, failed, timed_out, interrupted, launch_failed, hung, preempted };

  Status status = Status::succeeded;
  int interrupt_signal = 0; ///< for interrupted and preempted
  /// First rank that failed by air-run's clock (a rank that only lost its peer
  /// yields, see lost_peer.hpp), -1 if none.
  int root_cause_rank = -1;
  std::string reason;             ///< one line: "rank 1 exited with exit code 3"
  std::vector<RankOutcome> ranks; ///< in rank order
  std::chrono::system_clock::time_point started_at{};
  std::chrono::system_clock::time_point ended_at{};
  double duration_s = 0;
  std::uint64_t console_lines_dropped = 0;
  /// Processes still running below air-run after every rank had ended (a
  /// rank's background jobs, daemons), which air-run then ended.
  std::size_t leftover_processes = 0;
  /// The newest complete checkpoint in --checkpoint-dir once the ranks had
  /// ended, however the run ended (Ctrl-C too): what a new launch resumes
  /// from; "" = none, or no directory.
  std::string checkpoint;
  /// The first of them by name: "pid 4711 sleep (sleep 1000)".
  std::vector<std::string> leftover_names;
  /// Set (with status failed and root_cause_rank -1) when another node's
  /// failure stopped this run; `reason` then says "stopped because node ...".
  std::optional<RemoteFailure> remote_failure;
  /// Every attempt of the worker group, oldest first, the last one included
  /// (core/run/attempts.hpp; empty when the run never got that far). The
  /// fields above describe the last attempt, except started_at and
  /// duration_s, which cover the whole run.
  std::vector<AttemptRecord> attempts;
  /// How many times the group was restarted (attempts - 1, at least 0).
  int restarts() const { return attempts.empty() ? 0 : static_cast<int>(attempts.size()) - 1; }
  /// The teardown's SIGKILL came from a second interrupt, not from the end
  /// of the grace period.
  bool kill_requested = false;
  /// The last hang diagnosis (--hang-timeout), also when --on-hang report let the run go on.
  std::optional<HangReport> hang;
  /// Ranks slower than the others, as last judged (empty: none, or too few steps).
  std::vector<Straggler> stragglers;
  /// Set when a signal asked the ranks to stop at one step (status preempted).
  std::optional<PreemptionReport> preemption;
  /// Each rank's and GPU's bounded series over the whole run, every attempt
  /// included (core/run/timeline.hpp): what the HTML page draws.
  RunTimeline timeline;

  /// air-run's exit code per the exit-code table in docs/supervision.md: 0, rank's code / 128+N, 124,
  /// 126/127, 128+N; after a remote failure, the failing node's code.
  int exit_code() const;
};

/// Once the ranks have ended, fills `o.preemption->stopped_ranks` (when
/// set); an asked rank that exited 0 before the step ended on its own, not
/// stopped by air-run. A stop that no asked rank reached is no preemption
/// (status interrupted, its reason says so); one that some missed names how
/// many stopped. Pure.
void settle_preemption(RunOutcome& o);

/// The status's name in the JSON summary, JUnit and annotations: "timed_out".
std::string_view to_string(RunOutcome::Status status);

/// The status as the human report's sentence says it: "timed out", "could not be launched".
std::string_view status_words(RunOutcome::Status status);

} // namespace air
