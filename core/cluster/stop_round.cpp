// Node 0's side of one job-wide preemption. Pure.
#include "core/cluster/stop_round.hpp"

#include <algorithm>

namespace air {

bool StopRound::start(int sig, int node, std::chrono::milliseconds grace, Clock::time_point now,
                      std::chrono::milliseconds wait) {
  if (decided_) return false; // a later signal elsewhere: the stop step is out already
  if (deadline_) {
    grace_ends_ = std::min(grace_ends_, now + grace); // the grace period of the first signal
    return false;
  }
  signal_ = sig;
  node_ = node;
  grace_ends_ = now + grace;
  deadline_ = now + wait;
  asked_at_ = now;
  return true;
}

void StopRound::take(int node, NodeSteps counts, std::optional<Clock::duration> trip, Clock::time_point now) {
  counts.node = node;
  counted_[node] = Counted{counts, now, trip};
}

std::optional<JobStop> StopRound::decide(const std::vector<int>& awaited, int num_nodes,
                                         Clock::time_point now) {
  if (!gathering()) return std::nullopt;
  const bool all = std::all_of(awaited.begin(), awaited.end(), [this](int node) { return has(node); });
  if (!all && now < *deadline_) return std::nullopt;
  decided_ = true;
  // A count taken `trip` before it reached node 0 ages until now, and the
  // stop step takes about as long again to reach that node: its lead.
  std::optional<Clock::duration> known;
  for (const auto& [node, c] : counted_)
    if (c.trip && node != 0) known = std::max(known.value_or(Clock::duration::zero()), *c.trip);
  std::vector<NodeSteps> nodes;
  for (auto [node, c] : counted_) {
    const Clock::duration trip = c.trip.value_or(known.value_or(k_unknown_trip));
    c.steps.lead_s = std::chrono::duration<double>(now - c.arrived + 2 * trip).count();
    nodes.push_back(c.steps);
  }
  JobStop stop;
  stop.signal = signal_;
  stop.stop_step = pick_stop_step(nodes);
  stop.grace = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(grace_ends_ - now),
                        std::chrono::milliseconds(0));
  stop.node = node_;
  for (int node = 0; node < num_nodes; ++node)
    if (!has(node)) stop.missing_nodes.push_back(node);
  return stop;
}

} // namespace air
