// Durations ("1h30m"), elapsed times, UTC timestamps and rank lists ("0,2-3"):
// the small value grammars of the spec and the reports, kept apart from the
// YAML walk so they can be tested alone.
#include "core/base/duration.hpp"

#include "core/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>

namespace air {
namespace {

constexpr std::int64_t k_ms_per_s = 1000;
constexpr std::int64_t k_ms_per_m = 60 * k_ms_per_s;
constexpr std::int64_t k_ms_per_h = 60 * k_ms_per_m;
// One year. Deadlines are computed on steady_clock in nanoseconds; this bound
// keeps `now() + duration` far away from int64 overflow.
constexpr std::int64_t k_max_duration_ms = 8760 * k_ms_per_h;
// Bounds the vector a range like "0-999999999" would otherwise allocate.
constexpr int k_max_rank = 1'000'000;

enum class DurationParse { ok, malformed, too_long };

// Parses the grammar into milliseconds without floating point, so that
// "0.1h" is exactly 360000 ms and nothing overflows.
DurationParse parse_duration_ms(std::string_view text, std::int64_t& out) {
  if (text.empty()) return DurationParse::malformed;
  std::int64_t total = 0;
  std::int64_t last_unit = 0; // units must strictly decrease: 1h30m, not 30m1h
  std::size_t i = 0;
  bool first = true;
  while (i < text.size()) {
    std::int64_t whole = 0;
    std::size_t whole_digits = 0;
    for (; i < text.size() && is_digit(text[i]); ++i, ++whole_digits) {
      if (whole_digits >= 9) return DurationParse::too_long;
      whole = whole * 10 + (text[i] - '0');
    }
    std::int64_t frac = 0;
    std::int64_t frac_scale = 1;
    if (i < text.size() && text[i] == '.') {
      ++i;
      std::size_t frac_digits = 0;
      for (; i < text.size() && is_digit(text[i]); ++i, ++frac_digits) {
        if (frac_digits >= 9) return DurationParse::malformed;
        frac = frac * 10 + (text[i] - '0');
        frac_scale *= 10;
      }
      if (frac_digits == 0) return DurationParse::malformed;
    }
    if (whole_digits == 0 && frac_scale == 1) return DurationParse::malformed;
    std::int64_t unit = 0;
    if (i == text.size()) {
      if (!first) return DurationParse::malformed; // "1h30" is ambiguous
      unit = k_ms_per_s;                           // a bare number is seconds
    } else if (text.substr(i, 2) == "ms") {
      unit = 1;
      i += 2;
    } else if (text[i] == 'h') {
      unit = k_ms_per_h;
      ++i;
    } else if (text[i] == 'm') {
      unit = k_ms_per_m;
      ++i;
    } else if (text[i] == 's') {
      unit = k_ms_per_s;
      ++i;
    } else {
      return DurationParse::malformed;
    }
    if (!first && unit >= last_unit) return DurationParse::malformed;
    last_unit = unit;
    first = false;
    total += whole * unit + frac * unit / frac_scale;
    if (total > k_max_duration_ms) return DurationParse::too_long;
  }
  out = total;
  return DurationParse::ok;
}

} // namespace

Expected<Millis> parse_duration(std::string_view text, std::string_view what) {
  std::int64_t ms = 0;
  switch (parse_duration_ms(text, ms)) {
  case DurationParse::ok:
    return Millis(ms);
  case DurationParse::too_long:
    return usage_error(std::string(what) + ": duration " + single_quoted(text) +
                       " is too long (at most 8760h)");
  case DurationParse::malformed:
    break;
  }
  return usage_error(std::string(what) + ": expected a duration like 30s, 90m or 3h, got " +
                     single_quoted(text));
}

Expected<std::optional<Millis>> parse_opt_duration(std::string_view text, std::string_view what) {
  if (text == "none") return std::optional<Millis>();
  std::int64_t ms = 0;
  switch (parse_duration_ms(text, ms)) {
  case DurationParse::ok:
    return std::optional<Millis>(Millis(ms));
  case DurationParse::too_long:
    return usage_error(std::string(what) + ": duration " + single_quoted(text) +
                       " is too long (at most 8760h)");
  case DurationParse::malformed:
    break;
  }
  return usage_error(std::string(what) + ": expected a duration like 90m, 3h or none, got " +
                     single_quoted(text));
}

std::string format_duration(Millis d) {
  std::int64_t ms = d.count();
  if (ms < 0) return "-" + format_duration(Millis(-ms));
  if (ms == 0) return "0s";
  if (ms % k_ms_per_h == 0) return std::to_string(ms / k_ms_per_h) + "h";
  if (ms % k_ms_per_m == 0) return std::to_string(ms / k_ms_per_m) + "m";
  if (ms % k_ms_per_s == 0) return std::to_string(ms / k_ms_per_s) + "s";
  if (ms < k_ms_per_s) return std::to_string(ms) + "ms";
  std::string frac = std::to_string(1000 + ms % k_ms_per_s).substr(1); // zero padded to 3
  while (frac.back() == '0') frac.pop_back();
  return std::to_string(ms / k_ms_per_s) + "." + frac + "s";
}

Expected<std::vector<int>> parse_rank_list(std::string_view text, std::string_view what) {
  const auto bad = [&] {
    return usage_error(std::string(what) + ": expected ranks like 0,2-3, got " + single_quoted(text));
  };
  std::set<int> ranks;
  if (text.empty() || text == "all") return std::vector<int>();
  const auto parse_rank = [&](std::string_view item, int& out) -> bool {
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty() || item.size() > 9) return false;
    int value = 0;
    for (char c : item) {
      if (!is_digit(c)) return false;
      value = value * 10 + (c - '0');
    }
    out = value;
    return true;
  };
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t dash = item.find('-');
    int lo = 0;
    int hi = 0;
    if (dash == std::string_view::npos) {
      if (!parse_rank(item, lo)) return bad();
      hi = lo;
    } else if (!parse_rank(item.substr(0, dash), lo) || !parse_rank(item.substr(dash + 1), hi)) {
      return bad();
    }
    if (hi > k_max_rank) {
      return usage_error(std::string(what) + ": rank " + std::to_string(hi) + " is too large (at most " +
                         std::to_string(k_max_rank) + ")");
    }
    if (lo > hi) return usage_error(std::string(what) + ": range " + single_quoted(item) + " goes backwards");
    for (int r = lo; r <= hi; ++r) ranks.insert(r);
    start = comma + 1;
  }
  return std::vector<int>(ranks.begin(), ranks.end());
}

std::string format_rank_list(const std::vector<int>& ranks, std::string_view separator) {
  std::string out;
  std::size_t i = 0;
  while (i < ranks.size()) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += separator;
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string format_seconds(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  if (seconds > 1e12) seconds = 1e12; // keeps llround in range for absurd inputs
  if (seconds < 59.95) return fmt::format("{:.1f}s", seconds);
  const long long total = std::llround(seconds);
  const long long h = total / 3600;
  const long long m = (total % 3600) / 60;
  const long long s = total % 60;
  if (h > 0) return fmt::format("{}h{:02d}m{:02d}s", h, m, s);
  return fmt::format("{}m{:02d}s", m, s);
}

std::string format_utc(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto ms_total = duration_cast<milliseconds>(t.time_since_epoch()).count();
  auto secs = static_cast<std::time_t>(ms_total / 1000);
  auto ms = static_cast<int>(ms_total % 1000);
  if (ms < 0) { // before 1970: floor, not truncate
    ms += 1000;
    secs -= 1;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

std::string format_utc(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

} // namespace air
