#include "core/run/progress_watch.hpp"

#include <algorithm>
#include <utility>

namespace air {
namespace {

/// The rate is measured over at least this long, so that one slow step does
/// not make it jump.
constexpr auto k_rate_window = std::chrono::seconds(3);

} // namespace

ProgressWatch::ProgressWatch(std::size_t ranks)
    : files_(ranks), fr_asked_(ranks, 0), readings_(ranks), named_(ranks, false), explained_(ranks),
      rank_base_(ranks), rank_rate_(ranks, 0.0) {}

std::vector<std::pair<std::size_t, std::string>> ProgressWatch::take_lost() {
  return std::exchange(lost_, {});
}

std::string ProgressWatch::create(std::size_t index, const std::string& path) {
  readings_[index] = ProgressReading{};
  rank_base_[index].reset();
  rank_rate_[index] = 0;
  return files_[index].create(path);
}

bool ProgressWatch::poll(Clock::time_point now) {
  bool moved = false;
  std::vector<double> counts;
  for (std::size_t i = 0; i < files_.size(); ++i) {
    if (!files_[i].mapped()) continue;
    ProgressReading r = files_[i].read();
    if (!r.lost.empty()) {
      // The rank broke its own channel: its counts are gone for the rest of
      // the attempt, and the run goes on without them.
      files_[i].close();
      lost_.emplace_back(i, std::move(r.lost));
      r = ProgressReading{};
    }
    // A step, a collective entered (the one before it completed) or one
    // left: every one is progress, however long the step.
    const ProgressReading& before = readings_[i];
    if (r.steps != before.steps || r.coll_seq != before.coll_seq ||
        (before.coll_entered_ns != 0 && r.coll_entered_ns != before.coll_entered_ns))
      moved = true;
    readings_[i] = r;
    if (r.attached) counts.push_back(static_cast<double>(r.steps));
    measure_rank_rate(i, now);
  }
  if (counts.empty()) return moved;
  std::nth_element(counts.begin(), counts.begin() + static_cast<long>(counts.size() / 2), counts.end());
  const double median = counts[counts.size() / 2];
  if (median > 0) median_ = static_cast<std::uint64_t>(median);
  if (!rate_base_ || median < rate_base_->second) {
    rate_base_ = {now, median};
  } else if (now - rate_base_->first >= k_rate_window) {
    rate_ = (median - rate_base_->second) / std::chrono::duration<double>(now - rate_base_->first).count();
    rate_base_ = {now, median};
  }
  return moved;
}

void ProgressWatch::measure_rank_rate(std::size_t index, Clock::time_point now) {
  const std::uint64_t steps = readings_[index].steps;
  auto& base = rank_base_[index];
  if (!base || steps < base->second) {
    base = {now, steps}; // the first reading, or a rank that started again
  } else if (now - base->first >= k_rate_window) {
    rank_rate_[index] =
        static_cast<double>(steps - base->second) / std::chrono::duration<double>(now - base->first).count();
    base = {now, steps};
  }
}

double ProgressWatch::rank_rate(std::size_t index) const {
  if (rank_rate_[index] > 0) return rank_rate_[index];
  const ProgressReading& r = readings_[index];
  if (r.busy_steps == 0 || r.busy_ns == 0) return 0;
  return 1e9 * static_cast<double>(r.busy_steps) / static_cast<double>(r.busy_ns);
}

void ProgressWatch::request_stop(std::size_t index, std::uint64_t stop_step,
                                 std::int64_t deadline_realtime_ns) {
  files_[index].request_stop(stop_step, deadline_realtime_ns);
}

void ProgressWatch::mark_all_tearing_down() {
  for (auto& f : files_) f.mark_tearing_down();
}

void ProgressWatch::request_flight_recorder() {
  for (std::size_t i = 0; i < files_.size(); ++i) fr_asked_[i] = files_[i].request_flight_recorder();
}

bool ProgressWatch::flight_recorder_answered() const {
  for (std::size_t i = 0; i < files_.size(); ++i) {
    if (!files_[i].mapped()) continue;
    const ProgressReading r = files_[i].read();
    if (r.fr_armed && r.fr_done < fr_asked_[i]) return false;
  }
  return true;
}

std::vector<std::string>
ProgressWatch::name_new_stragglers(const std::vector<int>& rank_of,
                                   const std::function<std::string(std::size_t)>& explain) {
  std::vector<StepStats> stats;
  for (std::size_t i = 0; i < files_.size(); ++i) {
    const ProgressReading& r = readings_[i];
    if (!r.attached || r.busy_steps == 0) continue;
    stats.push_back(StepStats{rank_of[i], r.busy_steps, r.busy_ns});
  }
  stragglers_ = find_stragglers(stats);
  std::vector<std::string> lines;
  for (Straggler& s : stragglers_) {
    const auto at = std::find(rank_of.begin(), rank_of.end(), s.rank);
    if (at == rank_of.end()) continue;
    const auto index = static_cast<std::size_t>(at - rank_of.begin());
    if (!named_[index] && explain) explained_[index] = explain(index);
    s.gpu = explained_[index];
    if (named_[index]) continue;
    named_[index] = true;
    lines.push_back(straggler_line(s));
  }
  return lines;
}

} // namespace air
