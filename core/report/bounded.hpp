#pragma once

#include <cstddef>
#include <string>
#include <string_view>

// The limits of the CI systems that read air-run's reports, and the cut that
// keeps a text inside one. A rank's exception text is the rank's to choose:
// a 1.5 MiB message made a 1.57 MB step summary, which GitHub refuses whole
// ("supports content up to a size of 1024k").

namespace air {

/// GitHub's step summary: 1 MiB for the whole file; air-run stays under
/// this, with room for another step's lines.
inline constexpr std::size_t k_step_summary_bytes = 1'000'000;
/// One table cell or reason line of the step summary.
inline constexpr std::size_t k_summary_cell_bytes = 2'000;
/// GitHub shows 10 annotations of each kind (error, warning) a step.
inline constexpr std::size_t k_annotations_per_kind = 10;
/// An annotation's message, before the workflow command's escaping, which
/// at most triples it: GitHub's Checks API takes 64 KiB.
inline constexpr std::size_t k_annotation_message_bytes = 16 * 1024;
/// A JUnit failure's message attribute and its body (the traceback).
inline constexpr std::size_t k_junit_message_bytes = 4 * 1024;
inline constexpr std::size_t k_junit_body_bytes = 64 * 1024;

/// `text` when it has at most `max_bytes`; else its head and its tail, each
/// cut at a UTF-8 character's start, around a line that says how many bytes
/// were cut ("[... 1572864 bytes cut ...]"). The result has at most
/// `max_bytes` bytes (for max_bytes >= 64). Pure.
std::string bounded_text(std::string_view text, std::size_t max_bytes);

/// `text`'s head of at most `max_bytes`, cut at a UTF-8 character's start and
/// ended with "..." when cut: for one-line places (a cell, an attribute). Pure.
std::string bounded_head(std::string_view text, std::size_t max_bytes);

} // namespace air
