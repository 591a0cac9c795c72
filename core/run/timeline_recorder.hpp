#pragma once

#include "core/run/outcome.hpp"
#include "core/run/progress_watch.hpp"
#include "core/run/rank_table.hpp"
#include "core/run/timeline.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace air {

class NvmlLibrary;

/// Feeds the run's timeline (core/run/timeline.hpp) while the ranks run:
/// once a second each rank's step count and whether it has gone quiet (no
/// output line, no step for k_quiet_threshold_s), every few seconds the
/// GPUs' NVML readings (utilisation, memory, power, temperature). Each
/// reading is a few loads from memory already read by the loop, or a few
/// NVML calls; the series stay bounded however long the run lasts.
class TimelineRecorder {
public:
  using Clock = std::chrono::steady_clock;

  TimelineRecorder(const RankTable& ranks, int node_rank, int attempt);
  ~TimelineRecorder();
  TimelineRecorder(const TimelineRecorder&) = delete;
  TimelineRecorder& operator=(const TimelineRecorder&) = delete;

  /// Takes the readings that are due at `now` (steady clock).
  void tick(Clock::time_point now, const ProgressWatch& progress, const RunOutcome& out);
  /// A preemption signal came now.
  void mark_preempted(Clock::time_point now);
  /// The last readings, the open quiet stretches closed, each rank's end: the timeline.
  RunTimeline finish(Clock::time_point now, const ProgressWatch& progress, const RunOutcome& out);

private:
  struct RankWatch {
    std::optional<Clock::time_point> last_activity; ///< the last output line or step seen
    std::uint64_t steps = 0;
    std::optional<Clock::time_point> quiet_from; ///< the open quiet stretch's start
    std::vector<QuietStretch> quiet;
  };
  /// `tp` (steady) as seconds since the Unix epoch, through one pair of readings of both clocks.
  double wall(Clock::time_point tp) const;
  void read_ranks(Clock::time_point now, const ProgressWatch& progress, const RunOutcome& out, bool sample);
  void read_gpus();

  const RankTable& ranks_;
  std::chrono::system_clock::time_point wall_base_;
  Clock::time_point steady_base_;
  RunTimeline timeline_;
  std::vector<RankWatch> watch_;
  Clock::time_point next_sample_{};
  Clock::time_point next_gpu_sample_{};
  std::unique_ptr<NvmlLibrary> nvml_;
  bool nvml_tried_ = false;
};

} // namespace air
