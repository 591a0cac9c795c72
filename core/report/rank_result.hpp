#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace air {

/// Largest result file air-run reads (16 MiB). A result is meant for a metric
/// dict or a small return value; anything bigger belongs in a file the rank
/// writes itself. Larger files are reported as `too_large` without being read,
/// so a runaway rank cannot make air-run allocate gigabytes.
inline constexpr std::uint64_t k_max_result_bytes = 16ULL * 1024 * 1024;

/// Bytes of an invalid result file kept in the summary, to show what was written.
inline constexpr std::size_t k_result_excerpt_bytes = 200;

/// What a rank left in its AIR_RESULT_FILE.
struct RankResult {
  enum class State {
    missing,   ///< no file (the rank wrote no result), or no result file was planned
    ok,        ///< one JSON value, in `value`
    invalid,   ///< not one JSON value (or unreadable): `error` says why, `excerpt` shows its start
    too_large, ///< over the size limit: `error` says how big; the file was not read
  };
  State state = State::missing;
  nlohmann::ordered_json value; ///< the value when ok (object key order kept)
  std::string error;            ///< invalid / too_large: one line
  std::string excerpt;          ///< invalid: the first k_result_excerpt_bytes bytes, raw
  std::uint64_t size_bytes = 0; ///< file size, when there is a file
};

/// "missing", "ok", "invalid", "too_large": the spellings used in the summary.
std::string_view to_string(RankResult::State state);

/// Parses a result file's text. Pure; never throws. An empty text is invalid.
RankResult parse_rank_result(std::string_view text);

} // namespace air
