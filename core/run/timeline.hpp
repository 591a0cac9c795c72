#pragma once

#include <cstddef>
#include <string>
#include <vector>

// The run's life over time, kept small however long the run lasts: what the
// HTML page draws (core/report/html_page.hpp) and the summary's `timeline`
// holds (docs/summary-schema.md). Pure: the supervisor feeds it readings
// (core/run/timeline_recorder.hpp), nothing here reads a clock or a file.

namespace air {

/// Points kept per series at most, for a run of up to 8 ranks; more ranks
/// share `k_timeline_points_total` (at least `k_series_min_budget` each).
inline constexpr std::size_t k_series_budget = 256;
inline constexpr std::size_t k_series_min_budget = 32;
inline constexpr std::size_t k_timeline_points_total = 65536;
/// A rank silent (no output line, no step) this long has a quiet stretch.
inline constexpr double k_quiet_threshold_s = 5.0;
/// Quiet stretches kept per rank: the longest, in time order.
inline constexpr std::size_t k_quiet_budget = 32;

/// The budget of each rank's step series for a run of `ranks` ranks:
/// k_series_budget up to 256 ranks' worth of points in all, then shared. Pure.
std::size_t series_budget_for(std::size_t ranks);

/// One reading: seconds since the Unix epoch and the value.
struct SeriesPoint {
  double t = 0;
  double value = 0;
};

/// A time series that never holds more than `budget` points. Each kept point
/// stands for `width` consecutive readings; when the budget is reached,
/// neighbouring pairs merge and the width doubles, so a week-long run keeps
/// as many points as a minute-long one, evenly spread. `last` keeps the later
/// reading of a merged pair (a counter: steps), `mean` their mean (a gauge:
/// GPU utilisation). The readings not yet making up a full point are kept
/// apart and shown as the last point, so the newest reading is never lost.
class BoundedSeries {
public:
  enum class Merge { last, mean };
  explicit BoundedSeries(Merge merge = Merge::last, std::size_t budget = k_series_budget);

  /// Adds a reading; `t` must not go back in time (a reading that does is dropped).
  void add(double t, double value);
  /// The kept points, and the partial one last: at most `budget` + 1.
  std::vector<SeriesPoint> points() const;
  bool empty() const { return kept_.empty() && pending_count_ == 0; }
  /// Readings per kept point (1, 2, 4, ...).
  std::size_t width() const { return width_; }
  std::size_t budget() const { return budget_; }
  Merge merge() const { return merge_; }

  /// Puts `earlier`'s points (an earlier attempt's) before this series' own,
  /// merging pairs until the budget holds again.
  void prepend(const BoundedSeries& earlier);

private:
  SeriesPoint combine(const SeriesPoint& a, const SeriesPoint& b, std::size_t wa, std::size_t wb) const;
  void halve();
  Merge merge_;
  std::size_t budget_;
  std::size_t width_ = 1;
  std::vector<SeriesPoint> kept_;
  SeriesPoint pending_{};
  std::size_t pending_count_ = 0;
};

/// A stretch of seconds (Unix epoch) in which a rank printed nothing and made no step.
struct QuietStretch {
  double from = 0;
  double to = 0;
};

/// Keeps the `budget` longest stretches of `stretches`, in time order. Pure.
std::vector<QuietStretch> longest_stretches(std::vector<QuietStretch> stretches, std::size_t budget);

/// One attempt of one rank: when it started, made its first step, ended
/// (seconds since the Unix epoch; 0: did not happen).
struct RankSpan {
  int attempt = 0;
  double started = 0;
  double first_step = 0;
  double ended = 0;
};

/// One rank over the whole run.
struct RankTimeline {
  int rank = 0;
  int node_rank = 0;
  std::vector<RankSpan> spans; ///< one per attempt it ran in, oldest first
  BoundedSeries steps{BoundedSeries::Merge::last};
  std::vector<QuietStretch> quiet; ///< at most k_quiet_budget, in time order
};

/// One GPU's NVML readings over the run; a series is empty when NVML did not give it.
struct GpuTimeline {
  std::string uuid;
  BoundedSeries utilization_pct{BoundedSeries::Merge::mean};
  BoundedSeries memory_used_mib{BoundedSeries::Merge::mean};
  BoundedSeries power_w{BoundedSeries::Merge::mean};
  BoundedSeries temperature_c{BoundedSeries::Merge::mean};
};

/// Every rank's and GPU's series over the run, and when things happened.
struct RunTimeline {
  std::vector<RankTimeline> ranks; ///< this node's ranks, in rank order
  std::vector<GpuTimeline> gpus;   ///< this node's GPUs the ranks use
  double sample_interval_s = 1.0;  ///< the readings' spacing before any merge
  double preempted_at = 0;         ///< when the preemption signal came (0: none)

  /// Makes `earlier` (the previous attempts' timeline) part of this one:
  /// each rank's spans and series come first, the budgets still hold.
  void prepend(const RunTimeline& earlier);
};

} // namespace air
