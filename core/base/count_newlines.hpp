#pragma once

#include <cstddef>
#include <string_view>

namespace air {

/// How many '\n' `text` holds. memchr from one to the next: on a rank's
/// output (lines of some dozen bytes) several times faster than std::count,
/// which compares byte by byte (it was a third of air-run's time on a rank
/// printing 100-byte lines as fast as it could).
std::size_t count_newlines(std::string_view text);

/// Where the last `n` whole lines of `text` begin: just after its (n + 1)-th
/// newline from the end (what follows its last newline, an unfinished line,
/// is not one of them), or its start when it has no more newlines than `n`.
/// Scans back from the end: a read's last lines are found without looking at
/// the rest of it.
const char* start_of_last_lines(std::string_view text, std::size_t n);

} // namespace air
