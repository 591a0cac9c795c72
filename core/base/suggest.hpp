#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// Levenshtein distance (insertions, deletions, substitutions of one character).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word` when it is close enough to be a typo (at
/// most a third of its length, at least 1), "" otherwise. Drives the
/// "did you mean ...?" hints for spec keys and flags.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

} // namespace air
