#include "core/report/traceback.hpp"

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

/// torch 2.3+'s "[rank1]: " (or "[rank1]:") before each line a rank prints.
std::string_view without_rank_prefix(std::string_view line) {
  constexpr std::string_view k_rank = "[rank";
  if (line.substr(0, k_rank.size()) != k_rank) return line;
  std::size_t i = k_rank.size();
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  if (i == k_rank.size() || line.substr(i, 2) != "]:") return line;
  return line.substr(i + 2);
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

} // namespace

std::string exception_line(std::string_view text) {
  const auto lines = lines_of(text);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const std::string_view line = strip(*it);
    if (is_exception_line(line)) return std::string(line);
  }
  return {};
}

std::optional<SourceLocation> innermost_frame(std::string_view text) {
  const auto lines = lines_of(text);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    std::string_view line = strip(*it);
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
    return loc;
  }
  return std::nullopt;
}

std::string relative_to(const std::string& path, const std::string& workspace) {
  if (workspace.empty()) return path;
  std::string base = workspace;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (path.size() > base.size() + 1 && path.compare(0, base.size(), base) == 0 && path[base.size()] == '/')
    return path.substr(base.size() + 1);
  return path;
}

std::string job_name(const LaunchSpec& spec) {
  const auto file_stem = [](std::string_view path) {
    const auto slash = path.find_last_of('/');
    if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
    for (std::string_view ext : {".yaml", ".yml", ".py"}) {
      if (ends_with(path, ext) && path.size() > ext.size()) {
        path.remove_suffix(ext.size());
        break;
      }
    }
    return std::string(path);
  };
  if (!spec.spec_path.empty()) return file_stem(spec.spec_path);
  const auto& command = spec.command.value;
  if (command.empty()) return "air-run";
  return file_stem(command.front());
}

} // namespace air
