#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <vector>

// The run as a picture: one self-contained HTML page (inline CSS and SVG, no
// script, nothing fetched) drawn from run summaries alone, so that
// `--html` at the end of a run and `air-run report` later draw the same
// page. docs/html.md says what it shows.

namespace air {

/// Above this many ranks, lanes of ranks that behaved alike are drawn as one
/// (by node, exit and whether air-run stopped them); the outliers (the root
/// cause, failed ranks, stragglers, the hang's laggards) keep lanes of their own.
inline constexpr std::size_t k_html_lane_limit = 64;

/// The page for one job: `summaries` are the JSON summaries of its nodes
/// (one for a single-node run), in any order; fields a summary lacks are left
/// out of the page, never an error. Pure; never throws.
std::string html_page(const std::vector<nlohmann::ordered_json>& summaries);
/// The same for summaries held elsewhere, without copying them (the end of a
/// run draws from the summary it just wrote); null entries are skipped.
std::string html_page_of(const std::vector<const nlohmann::ordered_json*>& summaries);

/// "2026-04-07T10:13:24.123Z" as seconds since the Unix epoch; 0 when it
/// does not read as such a time. Pure.
double parse_utc_seconds(const std::string& text);

/// `text` for HTML text and attribute values: & < > " ' escaped, control
/// characters (but line breaks and tabs) as '?'. Pure.
std::string html_escape(const std::string& text);

} // namespace air
