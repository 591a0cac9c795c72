#include "core/report/shown_tail.hpp"

#include "core/run/terminal_line.hpp"

namespace air {
namespace {

constexpr std::string_view k_header = "Traceback (most recent call last):";

/// Where torch's "[rankN]:" prefix ends just before `at`, or `at` when none
/// does: the prefix belongs to the header's line.
std::size_t prefix_start(std::string_view line, std::size_t at) {
  std::size_t i = at;
  while (i > 0 && line[i - 1] == ' ') --i;
  if (i < 2 || line[i - 1] != ':' || line[i - 2] != ']') return at;
  std::size_t j = i - 2;
  std::size_t digits = 0;
  while (j > 0 && line[j - 1] >= '0' && line[j - 1] <= '9') {
    --j;
    ++digits;
  }
  constexpr std::string_view k_rank = "[rank";
  if (digits == 0 || j < k_rank.size() || line.substr(j - k_rank.size(), k_rank.size()) != k_rank) return at;
  return j - k_rank.size();
}

} // namespace

std::vector<std::string> shown_lines(std::string_view raw) {
  std::string line = visible_line(raw);
  const std::size_t header = line.rfind(k_header);
  if (header == std::string::npos || header == 0) return {std::move(line)};
  const std::size_t start = prefix_start(line, header);
  if (start == 0) return {std::move(line)};
  return {line.substr(0, start), line.substr(start)};
}

std::vector<std::string> shown_tail(const std::deque<std::string>& tail) {
  std::vector<std::string> out;
  out.reserve(tail.size());
  for (const std::string& raw : tail)
    for (std::string& line : shown_lines(raw)) out.push_back(std::move(line));
  return out;
}

std::string shown_tail_text(const std::deque<std::string>& tail) {
  const std::vector<std::string> lines = shown_tail(tail);
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    out += lines[i];
  }
  return out;
}

std::string shown_last_line(const std::deque<std::string>& tail) {
  if (tail.empty()) return {};
  return shown_lines(tail.back()).back();
}

} // namespace air
