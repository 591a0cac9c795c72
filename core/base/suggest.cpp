#include "core/base/suggest.hpp"

#include <algorithm>
#include <cstdint>

namespace air {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_score = SIZE_MAX;
  for (const auto& candidate : candidates) {
    const std::size_t score = edit_distance(word, candidate);
    const std::size_t limit = std::max<std::size_t>(1, candidate.size() / 3);
    if (score <= limit && score < best_score) {
      best_score = score;
      best = candidate;
    }
  }
  return best;
}

} // namespace air
