// The rank table: the supervisor's one list of this node's ranks.
#include "core/run/rank_table.hpp"

#include "core/run/console_style.hpp"

#include <algorithm>

namespace air {

RankTable::RankTable(const LaunchPlan& plan, const ConsoleOptions& console, RunOutcome& out) {
  ranks_.resize(plan.ranks.size());
  out.ranks.resize(plan.ranks.size());
  for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
    RankState& r = ranks_[i];
    r.plan = &plan.ranks[i];
    r.index = i;
    r.streams[1].is_stderr = true;
    if (console.prefix) {
      r.prefix = rank_prefix(r.plan->rank, console.stdout_color);
      r.prefix_err = rank_prefix(r.plan->rank, console.stderr_color);
    }
    r.filter_prefix = rank_prefix(r.plan->rank, false); // a file: prefixed even with one rank, never coloured
    out.ranks[i].rank = r.plan->rank;
    out.ranks[i].local_rank = r.plan->local_rank;
    ids_.push_back(r.plan->rank);
  }
}

void RankTable::started(RankState& r, pid_t pid) {
  r.spawned = true;
  r.pid = pid;
  by_pid_[pid] = &r;
}

RankState* RankTable::by_pid(pid_t pid) {
  const auto it = by_pid_.find(pid);
  return it == by_pid_.end() ? nullptr : it->second;
}

std::size_t RankTable::running() const {
  return static_cast<std::size_t>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const RankState& r) { return r.running(); }));
}

bool RankTable::all_ended() const {
  return std::none_of(ranks_.begin(), ranks_.end(), [](const RankState& r) { return r.running(); });
}

bool RankTable::any_reads_stdin() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const RankState& r) { return r.reads_stdin; });
}

} // namespace air
