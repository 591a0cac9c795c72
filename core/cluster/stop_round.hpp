#pragma once

#include "core/run/job_preemption.hpp"
#include "core/run/outcome.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace air {

/// Node 0's side of one job-wide preemption (docs/preemption.md, "Several
/// nodes"): a signal on any node starts the round, which takes each node's
/// step counts with the time each took to reach node 0, and ends when every
/// node it waits for counted, or at the deadline, with the job's stop step
/// (pick_stop_step, each node's lead being how old its count is plus the
/// trip back) and what is left of the first signal's grace period. Pure: no
/// sockets, the clock is passed in.
class StopRound {
public:
  using Clock = std::chrono::steady_clock;

  /// Half a round trip to a node whose counts came unasked (a `preempt`
  /// line) when no other node's answer measured one: generous for a data
  /// centre's network, and doubled again by pick_stop_step's margin.
  static constexpr std::chrono::milliseconds k_unknown_trip{100};

  /// Signal `sig` reached node `node`, whose ranks have `grace` from `now`.
  /// true: the round starts, gathering until now + wait (the caller asks the
  /// nodes without counts with `count`); false: a round already gathers (it
  /// keeps the earlier end of the grace period) or decided.
  bool start(int sig, int node, std::chrono::milliseconds grace, Clock::time_point now,
             std::chrono::milliseconds wait);
  /// Node `node`'s counts, received at `now`, taken `trip` before (half the
  /// round trip of `count`; nullopt: unknown, zero for node 0's own).
  void take(int node, NodeSteps counts, std::optional<Clock::duration> trip, Clock::time_point now);
  /// Whether node `node`'s counts are in.
  bool has(int node) const { return counted_.count(node) != 0; }
  /// Whether the round gathers counts: started and not decided.
  bool gathering() const { return deadline_.has_value() && !decided_; }
  bool decided() const { return decided_; }
  /// When `count` went out: the start of every answer's round trip.
  Clock::time_point asked_at() const { return asked_at_; }
  /// When the gathering ends at the latest; nullopt when it does not gather.
  std::optional<Clock::time_point> deadline() const { return gathering() ? deadline_ : std::nullopt; }

  /// The job's stop once every node in `awaited` counted, or once `now`
  /// reached the deadline; nodes 0..num_nodes-1 without counts are named
  /// missing. Decided once: nullopt meanwhile and afterwards.
  std::optional<JobStop> decide(const std::vector<int>& awaited, int num_nodes, Clock::time_point now);
  /// Forgets the round (a new attempt starts afresh).
  void reset() { *this = StopRound(); }

private:
  /// One node's counts, with when they arrived and their trip.
  struct Counted {
    NodeSteps steps;
    Clock::time_point arrived{};
    std::optional<Clock::duration> trip;
  };

  int signal_ = 0;
  int node_ = -1; ///< the node the signal reached first
  Clock::time_point grace_ends_{};
  std::optional<Clock::time_point> deadline_;
  Clock::time_point asked_at_{};
  std::map<int, Counted> counted_;
  bool decided_ = false;
};

/// Node 0's wait at the end of a stop across nodes, once its own ranks are
/// done: every other node says `stopped` when all its ranks have exited, with
/// how many of those asked stopped at the step. A requeue (`scontrol
/// requeue`) ends whatever still runs in the job, a slower node's save
/// included, so node 0 requeues only after every node's word. Pure.
class StopEnds {
public:
  /// Node `node`'s word: `stopped` of its `asked` ranks stopped at the step, and every rank there exited.
  void take(int node, int asked, int stopped);
  /// Node `node` can say nothing more: its connection closed, or it failed.
  void gone(int node) { gone_.insert(node); }
  /// Whether each of nodes 1..num_nodes-1 has said its word or is gone: the wait is over.
  bool complete(int num_nodes) const;
  /// Nodes 1..num_nodes-1 whose ranks did not all stop at the step, or that
  /// did not say they did (gone, or silent until the wait ended).
  std::vector<int> unsaved(int num_nodes) const;

private:
  struct Word {
    int asked = 0;
    int stopped = 0;
  };
  std::map<int, Word> said_;
  std::set<int> gone_;
};

/// Node 0's answer, after a stop for Slurm's warning, on requeueing the job.
struct RequeueVerdict {
  bool requeue = false; ///< every rank asked, on every node, stopped at the step: `scontrol requeue`
  /// Why not, when that is worth a line ("node 1's ranks did not all stop
  /// at step 53"); "" when there is nothing to say (not a warning's stop, no
  /// rank of node 0 stopped there: nothing complete to resume from).
  std::string why_not;
};

/// Whether node 0 requeues the job after the stop `p` (its own ranks'
/// outcome, with the other nodes' unsaved_nodes): only for USR1/USR2 (a
/// warning: Slurm ends the job itself after SIGTERM), only when each of its
/// own asked ranks stopped at the step and no other node is unsaved. Pure.
RequeueVerdict requeue_verdict(const PreemptionReport& p);

} // namespace air
