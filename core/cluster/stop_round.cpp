// Node 0's side of one job-wide preemption. Pure.
#include "core/cluster/stop_round.hpp"

#include "core/run/stop_signals.hpp"

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

void StopEnds::take(int node, int asked, int stopped) { said_[node] = Word{asked, stopped}; }

bool StopEnds::complete(int num_nodes) const {
  for (int node = 1; node < num_nodes; ++node)
    if (said_.count(node) == 0 && gone_.count(node) == 0) return false;
  return true;
}

std::vector<int> StopEnds::unsaved(int num_nodes) const {
  std::vector<int> out;
  for (int node = 1; node < num_nodes; ++node) {
    const auto it = said_.find(node);
    if (it == said_.end() || it->second.stopped < it->second.asked) out.push_back(node);
  }
  return out;
}

RequeueVerdict requeue_verdict(const PreemptionReport& p) {
  RequeueVerdict v;
  if (!is_warning_signal(p.signal) || p.polling_ranks.empty() ||
      p.stopped_ranks.size() != p.polling_ranks.size())
    return v; // nothing complete to resume from: the job ends as it is
  if (!p.unsaved_nodes.empty()) {
    std::string nodes;
    for (const int n : p.unsaved_nodes) nodes += (nodes.empty() ? "" : ", ") + std::to_string(n);
    v.why_not =
        std::string(p.unsaved_nodes.size() == 1 ? "node " : "nodes ") + nodes +
        " did not say that every rank asked stopped at " +
        (p.stop_step > 0 ? "step " + std::to_string(p.stop_step) : std::string("its next should_stop()")) +
        " and exited";
    return v;
  }
  v.requeue = true;
  return v;
}

} // namespace air
