#include "core/report/timeline_json.hpp"

#include <cmath>

namespace air {

namespace {

using Json = nlohmann::ordered_json;

double rounded(double v, double scale) { return std::round(v * scale) / scale; }

/// Seconds after t0 (ms), or null for a time that did not happen (0).
Json at(double t, double t0) { return t == 0 ? Json(nullptr) : Json(rounded(t - t0, 1000.0)); }

Json series_json(const BoundedSeries& series, double t0) {
  Json out = Json::array();
  for (const SeriesPoint& p : series.points())
    out.push_back(Json::array({rounded(p.t - t0, 1000.0), rounded(p.value, 100.0)}));
  return out;
}

} // namespace

Json timeline_json(const RunTimeline& timeline, std::chrono::system_clock::time_point t0_point) {
  const double t0 = std::chrono::duration<double>(t0_point.time_since_epoch()).count();
  Json out;
  out["version"] = k_timeline_version;
  out["sample_interval_s"] = timeline.sample_interval_s;
  out["quiet_threshold_s"] = k_quiet_threshold_s;
  out["preempted_at_s"] = at(timeline.preempted_at, t0);
  out["ranks"] = Json::array();
  for (const RankTimeline& r : timeline.ranks) {
    Json lane;
    lane["rank"] = r.rank;
    lane["node_rank"] = r.node_rank;
    lane["spans"] = Json::array();
    for (const RankSpan& s : r.spans)
      lane["spans"].push_back({{"attempt", s.attempt},
                               {"started_s", at(s.started, t0)},
                               {"first_step_s", at(s.first_step, t0)},
                               {"ended_s", at(s.ended, t0)}});
    lane["steps_width"] = r.steps.width();
    lane["steps"] = series_json(r.steps, t0);
    lane["quiet"] = Json::array();
    for (const QuietStretch& q : r.quiet)
      lane["quiet"].push_back(Json::array({rounded(q.from - t0, 1000.0), rounded(q.to - t0, 1000.0)}));
    out["ranks"].push_back(std::move(lane));
  }
  out["gpus"] = Json::array();
  for (const GpuTimeline& g : timeline.gpus) {
    Json gpu;
    gpu["uuid"] = g.uuid;
    gpu["utilization_pct"] = series_json(g.utilization_pct, t0);
    gpu["memory_used_mib"] = series_json(g.memory_used_mib, t0);
    gpu["power_w"] = series_json(g.power_w, t0);
    gpu["temperature_c"] = series_json(g.temperature_c, t0);
    out["gpus"].push_back(std::move(gpu));
  }
  return out;
}

} // namespace air
