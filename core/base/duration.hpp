#pragma once

#include "core/base/error.hpp"

#include <chrono>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The small value grammars of the spec and of every report: durations
// ("1h30m"), elapsed times, UTC timestamps and rank lists ("0,2-3"). Pure.

namespace air {

/// Milliseconds, the unit of every duration in a spec.
using Millis = std::chrono::milliseconds;

/// Parses "30", "30s", "1500ms", "90m", "3h", "1h30m", "1.5s" (units in
/// decreasing order, a bare number is seconds). Zero is accepted; callers
/// check their own lower bound. Errors are "<what>: expected a duration ...".
Expected<Millis> parse_duration(std::string_view text, std::string_view what);

/// Like `parse_duration` but also accepts "none" (nullopt).
Expected<std::optional<Millis>> parse_opt_duration(std::string_view text, std::string_view what);

/// Formats a duration the way users write them ("3h", "90m", "30s", "1.5s").
std::string format_duration(Millis d);

/// Parses "0,2-3" into {0,2,3} (sorted, without duplicates); "" and "all"
/// give the empty list (every rank). Errors name `what`.
Expected<std::vector<int>> parse_rank_list(std::string_view text, std::string_view what);

/// Formats ranks compactly, the inverse of `parse_rank_list`: {0,2,3} -> "0,2-3".
std::string format_rank_list(const std::vector<int>& ranks, std::string_view separator = ",");

/// Elapsed time for reports: "4.2s" under a minute, then "3m07s", "1h02m03s".
std::string format_seconds(double seconds);

/// "2026-11-30T02:00:00.123Z": a wall-clock time in UTC with milliseconds.
std::string format_utc(std::chrono::system_clock::time_point t);

/// "2026-11-30T02:00:00Z": a wall-clock time in UTC to the second.
std::string format_utc(std::time_t t);

} // namespace air
