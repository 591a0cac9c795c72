// The run's timeline, fed from the supervisor's loop.
#include "core/run/timeline_recorder.hpp"

#include "core/hw/nvml.hpp"

#include <algorithm>

namespace air {

namespace {

constexpr auto k_sample_every = std::chrono::seconds(1);
constexpr auto k_gpu_sample_every = std::chrono::seconds(2);

} // namespace

TimelineRecorder::TimelineRecorder(const RankTable& ranks, int node_rank, int attempt)
    : ranks_(ranks), wall_base_(std::chrono::system_clock::now()), steady_base_(Clock::now()),
      watch_(ranks.size()) {
  const std::size_t budget = series_budget_for(ranks.size());
  timeline_.sample_interval_s = std::chrono::duration<double>(k_sample_every).count();
  for (const RankState& r : ranks) {
    RankTimeline lane;
    lane.rank = r.plan->rank;
    lane.node_rank = node_rank;
    lane.spans.push_back(RankSpan{attempt, 0, 0, 0});
    lane.steps = BoundedSeries(BoundedSeries::Merge::last, budget);
    timeline_.ranks.push_back(std::move(lane));
    const std::string& uuid = r.plan->gpu_uuid;
    const bool known = std::any_of(timeline_.gpus.begin(), timeline_.gpus.end(),
                                   [&](const GpuTimeline& g) { return g.uuid == uuid; });
    if (uuid.empty() || known) continue;
    GpuTimeline gpu; // its series merge by the mean: they are gauges
    gpu.uuid = uuid;
    timeline_.gpus.push_back(std::move(gpu));
  }
}

TimelineRecorder::~TimelineRecorder() = default;

double TimelineRecorder::wall(Clock::time_point tp) const {
  const auto since = std::chrono::duration_cast<std::chrono::system_clock::duration>(tp - steady_base_);
  return std::chrono::duration<double>((wall_base_ + since).time_since_epoch()).count();
}

void TimelineRecorder::read_ranks(Clock::time_point now, const ProgressWatch& progress, const RunOutcome& out,
                                  bool sample) {
  const double threshold = k_quiet_threshold_s;
  for (const RankState& r : ranks_) {
    RankTimeline& lane = timeline_.ranks[r.index];
    RankWatch& w = watch_[r.index];
    RankSpan& span = lane.spans.back();
    if (!r.spawned) continue;
    if (span.started == 0) span.started = wall(r.started);
    const ProgressReading& reading = progress.reading(r.index);
    const Clock::time_point seen = r.reaped ? std::min(now, r.reaped_at) : now;
    if (reading.attached && reading.steps != w.steps) {
      if (w.steps == 0 && span.first_step == 0) span.first_step = wall(seen);
      w.steps = reading.steps;
      w.last_activity = seen;
    }
    if (const auto& line = out.ranks[r.index].last_output_at;
        line && (!w.last_activity || *line > *w.last_activity))
      w.last_activity = *line;
    const Clock::time_point active = w.last_activity.value_or(r.started);
    if (w.quiet_from && active > *w.quiet_from) { // it spoke again: the stretch ends there
      w.quiet.push_back({wall(*w.quiet_from), wall(active)});
      w.quiet_from.reset();
    }
    if (!w.quiet_from && std::chrono::duration<double>(seen - active).count() >= threshold)
      w.quiet_from = active;
    if (sample && reading.attached) lane.steps.add(wall(seen), static_cast<double>(reading.steps));
    if (w.quiet.size() > 2 * k_quiet_budget) w.quiet = longest_stretches(std::move(w.quiet), k_quiet_budget);
  }
}

void TimelineRecorder::read_gpus() {
  if (timeline_.gpus.empty()) return;
  if (!nvml_tried_) {
    nvml_tried_ = true;
    if (auto lib = NvmlLibrary::open()) nvml_ = std::make_unique<NvmlLibrary>(std::move(*lib));
  }
  if (!nvml_) return;
  const double t = wall(Clock::now());
  for (GpuTimeline& gpu : timeline_.gpus) {
    if (auto live = nvml_->read_live(gpu.uuid)) {
      if (live->utilization_pct) gpu.utilization_pct.add(t, *live->utilization_pct);
      if (live->memory_used_bytes)
        gpu.memory_used_mib.add(t, static_cast<double>(*live->memory_used_bytes) / (1024.0 * 1024.0));
      if (live->temperature_c) gpu.temperature_c.add(t, *live->temperature_c);
    }
    if (auto clocks = nvml_->read_clock_reading(gpu.uuid); clocks && clocks->power_mw)
      gpu.power_w.add(t, *clocks->power_mw / 1000.0);
  }
}

void TimelineRecorder::tick(Clock::time_point now, const ProgressWatch& progress, const RunOutcome& out) {
  if (now < next_sample_) return;
  next_sample_ = now + k_sample_every;
  read_ranks(now, progress, out, true);
  if (now < next_gpu_sample_) return;
  next_gpu_sample_ = now + k_gpu_sample_every;
  read_gpus();
}

void TimelineRecorder::mark_preempted(Clock::time_point now) {
  if (timeline_.preempted_at == 0) timeline_.preempted_at = wall(now);
}

RunTimeline TimelineRecorder::finish(Clock::time_point now, const ProgressWatch& progress,
                                     const RunOutcome& out) {
  read_ranks(now, progress, out, true);
  for (const RankState& r : ranks_) {
    RankTimeline& lane = timeline_.ranks[r.index];
    RankWatch& w = watch_[r.index];
    const Clock::time_point end = r.reaped ? r.reaped_at : now;
    if (r.spawned) lane.spans.back().ended = wall(end);
    if (w.quiet_from && end > *w.quiet_from) w.quiet.push_back({wall(*w.quiet_from), wall(end)});
    lane.quiet = longest_stretches(std::move(w.quiet), k_quiet_budget);
  }
  return std::move(timeline_);
}

} // namespace air
