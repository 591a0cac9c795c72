#include "core/run/timeline.hpp"

#include <algorithm>

namespace air {

std::size_t series_budget_for(std::size_t ranks) {
  if (ranks == 0) return k_series_budget;
  return std::clamp(k_timeline_points_total / ranks, k_series_min_budget, k_series_budget);
}

BoundedSeries::BoundedSeries(Merge merge, std::size_t budget)
    : merge_(merge), budget_(std::max<std::size_t>(budget, 2)) {}

SeriesPoint BoundedSeries::combine(const SeriesPoint& a, const SeriesPoint& b, std::size_t wa,
                                   std::size_t wb) const {
  if (merge_ == Merge::last) return b;
  // A mean weighted by how many readings each side stands for; its time is
  // the later one's, so that a point never claims a time not yet reached.
  const double total = static_cast<double>(wa + wb);
  return {b.t, (a.value * static_cast<double>(wa) + b.value * static_cast<double>(wb)) / total};
}

void BoundedSeries::halve() {
  std::vector<SeriesPoint> merged;
  merged.reserve(kept_.size() / 2 + 1);
  for (std::size_t i = 0; i + 1 < kept_.size(); i += 2)
    merged.push_back(combine(kept_[i], kept_[i + 1], width_, width_));
  // An odd point out stays as it is: it stands for fewer readings, and the
  // newest ones come after it.
  if (kept_.size() % 2 == 1) merged.push_back(kept_.back());
  kept_ = std::move(merged);
  width_ *= 2;
}

void BoundedSeries::add(double t, double value) {
  const double newest = pending_count_ > 0 ? pending_.t : (kept_.empty() ? t : kept_.back().t);
  if (t < newest) return;
  const SeriesPoint reading{t, value};
  pending_ = pending_count_ == 0 ? reading : combine(pending_, reading, pending_count_, 1);
  if (++pending_count_ < width_) return;
  kept_.push_back(pending_);
  pending_count_ = 0;
  if (kept_.size() >= budget_) halve();
}

std::vector<SeriesPoint> BoundedSeries::points() const {
  std::vector<SeriesPoint> out = kept_;
  if (pending_count_ > 0) out.push_back(pending_);
  return out;
}

void BoundedSeries::prepend(const BoundedSeries& earlier) {
  std::vector<SeriesPoint> all = earlier.points();
  if (!all.empty() && !kept_.empty() && kept_.front().t < all.back().t) return; // not earlier: keep ours
  all.insert(all.end(), kept_.begin(), kept_.end());
  kept_ = std::move(all);
  width_ = std::max(width_, earlier.width_);
  while (kept_.size() >= budget_) halve();
}

std::vector<QuietStretch> longest_stretches(std::vector<QuietStretch> stretches, std::size_t budget) {
  if (stretches.size() > budget) {
    std::stable_sort(stretches.begin(), stretches.end(), [](const QuietStretch& a, const QuietStretch& b) {
      return a.to - a.from > b.to - b.from;
    });
    stretches.resize(budget);
  }
  std::sort(stretches.begin(), stretches.end(),
            [](const QuietStretch& a, const QuietStretch& b) { return a.from < b.from; });
  return stretches;
}

void RunTimeline::prepend(const RunTimeline& earlier) {
  for (RankTimeline& mine : ranks) {
    const auto it = std::find_if(earlier.ranks.begin(), earlier.ranks.end(),
                                 [&](const RankTimeline& r) { return r.rank == mine.rank; });
    if (it == earlier.ranks.end()) continue;
    mine.spans.insert(mine.spans.begin(), it->spans.begin(), it->spans.end());
    mine.steps.prepend(it->steps);
    std::vector<QuietStretch> quiet = it->quiet;
    quiet.insert(quiet.end(), mine.quiet.begin(), mine.quiet.end());
    mine.quiet = longest_stretches(std::move(quiet), k_quiet_budget);
  }
  // A rank of an earlier attempt that this one lacks (the group shrank) keeps its lane.
  for (const RankTimeline& old : earlier.ranks) {
    const bool present =
        std::any_of(ranks.begin(), ranks.end(), [&](const RankTimeline& r) { return r.rank == old.rank; });
    if (!present) ranks.push_back(old);
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const RankTimeline& a, const RankTimeline& b) { return a.rank < b.rank; });
  for (GpuTimeline& mine : gpus) {
    const auto it = std::find_if(earlier.gpus.begin(), earlier.gpus.end(),
                                 [&](const GpuTimeline& g) { return g.uuid == mine.uuid; });
    if (it == earlier.gpus.end()) continue;
    mine.utilization_pct.prepend(it->utilization_pct);
    mine.memory_used_mib.prepend(it->memory_used_mib);
    mine.power_w.prepend(it->power_w);
    mine.temperature_c.prepend(it->temperature_c);
  }
  for (const GpuTimeline& old : earlier.gpus) {
    const bool present =
        std::any_of(gpus.begin(), gpus.end(), [&](const GpuTimeline& g) { return g.uuid == old.uuid; });
    if (!present) gpus.push_back(old);
  }
  if (preempted_at == 0) preempted_at = earlier.preempted_at;
}

} // namespace air
