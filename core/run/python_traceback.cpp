#include "core/run/python_traceback.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace air {

namespace {

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return lines;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

/// torch 2.3+'s "[rank1]: " (or "[rank1]:") at the start of `line`: its rank
/// and its length, the one blank after the colon included; nullopt when none.
std::optional<std::pair<int, std::size_t>> rank_prefix(std::string_view line) {
  constexpr std::string_view k_rank = "[rank";
  if (line.substr(0, k_rank.size()) != k_rank) return std::nullopt;
  std::size_t i = k_rank.size();
  int rank = 0;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9' && i < k_rank.size() + 9)
    rank = rank * 10 + (line[i++] - '0');
  if (i == k_rank.size() || line.substr(i, 2) != "]:") return std::nullopt;
  i += 2;
  if (i < line.size() && line[i] == ' ') ++i;
  return std::make_pair(rank, i);
}

/// `line` without torch's prefix, whichever rank it names.
std::string_view without_rank_prefix(std::string_view line) {
  const auto prefix = rank_prefix(line);
  return prefix ? line.substr(prefix->second) : line;
}

/// "[rank1]: " prefixes and leading blanks are not part of the line.
std::string_view strip(std::string_view line) {
  line = without_rank_prefix(line);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  return line;
}

bool is_exception_line(std::string_view line) {
  std::size_t n = 0;
  while (n < line.size() && name_char(line[n])) ++n;
  if (n == 0 || line[0] == '.' || (line[0] >= '0' && line[0] <= '9')) return false;
  if (n < line.size() && line[n] != ':') return false;
  const std::string_view name = line.substr(0, n);
  for (std::string_view suffix : {"Error", "Exception", "Interrupt", "Exit", "Warning"})
    if (ends_with(name, suffix)) return true;
  return false;
}

/// air-run's own Python: the shim's folder, the warm start's program, the air package.
bool is_air_run_file(std::string_view path) {
  constexpr std::string_view k_markers[] = {"/pyshim/",   "/air_run_warm.py", "/air/_",
                                            "/air/data/", "/air/__init__.py", "/air/torch_distributor.py"};
  for (std::string_view marker : k_markers)
    if (path.find(marker) != std::string_view::npos) return true;
  return false;
}

} // namespace

std::string exception_line(std::string_view text) {
  const auto lines = lines_of(text);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const std::string_view line = strip(*it);
    if (is_exception_line(line)) return std::string(line);
  }
  return {};
}

std::string_view without_own_rank_prefix(std::string_view line, int rank) {
  const auto prefix = rank_prefix(line);
  return prefix && prefix->first == rank ? line.substr(prefix->second) : line;
}

bool is_library_file(std::string_view path) {
  if (path.find("/site-packages/") != std::string_view::npos ||
      path.find("/dist-packages/") != std::string_view::npos || is_air_run_file(path))
    return true;
  // The standard library: .../lib/python3.11/threading.py, /usr/lib/python3/...
  for (std::size_t at = path.find("/lib/python3"); at != std::string_view::npos;
       at = path.find("/lib/python3", at + 1)) {
    std::size_t i = at + 12;
    while (i < path.size() && ((path[i] >= '0' && path[i] <= '9') || path[i] == '.')) ++i;
    if (i < path.size() && path[i] == '/') return true;
  }
  return false;
}

std::optional<SourceLocation> innermost_frame(std::string_view text) {
  const auto lines = lines_of(text);
  std::optional<SourceLocation> innermost;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    std::string_view line = strip(*it);
    // Frames above the last traceback's header belong to an earlier one (a
    // chained exception's cause).
    if (innermost && line.substr(0, 10) == "Traceback ") break;
    constexpr std::string_view k_file = "File \"";
    if (line.substr(0, k_file.size()) != k_file) continue;
    line.remove_prefix(k_file.size());
    const auto quote = line.find("\", line ");
    if (quote == std::string_view::npos || quote == 0) continue;
    SourceLocation loc;
    loc.file = std::string(line.substr(0, quote));
    std::string_view rest = line.substr(quote + 8);
    int number = 0;
    std::size_t digits = 0;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9' && digits < 9)
      number = number * 10 + (rest[digits++] - '0');
    if (digits == 0 || loc.file.front() == '<') continue; // <string>, <frozen ...>: no file to point at
    loc.line = number;
    if (!is_library_file(loc.file)) return loc;
    // The shim's or the air package's own file is never the place: the
    // library frame that called it, or nothing.
    if (!innermost && !is_air_run_file(loc.file)) innermost = std::move(loc);
  }
  return innermost;
}

} // namespace air
