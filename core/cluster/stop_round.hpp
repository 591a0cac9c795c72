#pragma once

#include "core/run/job_preemption.hpp"

#include <chrono>
#include <map>
#include <optional>
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

} // namespace air
