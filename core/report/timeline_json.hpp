#pragma once

#include "core/run/timeline.hpp"

#include <nlohmann/json.hpp>

#include <chrono>

namespace air {

/// Version of the summary's `timeline` object's shape, apart from the
/// summary's own schema_version: the HTML page (core/report/html_page.hpp)
/// reads it, and a page drawn later from an old summary checks it.
inline constexpr int k_timeline_version = 1;

/// The summary's `timeline` (docs/summary-schema.md): times in seconds after
/// `t0` (the run's start), rounded to milliseconds; each series as
/// [[t, value], ...]. Pure.
nlohmann::ordered_json timeline_json(const RunTimeline& timeline, std::chrono::system_clock::time_point t0);

} // namespace air
