// The git commit of the working directory, for mlflow.source.git.commit.
#include "core/mlflow/git.hpp"

#include <algorithm>
#include <fstream>
#include <vector>

namespace air::mlflow {

namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_first_line(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

bool is_commit_id(const std::string& s) {
  return (s.size() == 40 || s.size() == 64) && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

/// The git directory for a work tree root: `.git` itself, or where a `.git`
/// file ("gitdir: ...") of a worktree or submodule points.
std::optional<fs::path> git_dir_of(const fs::path& root) {
  std::error_code ec;
  const fs::path dot_git = root / ".git";
  if (fs::is_directory(dot_git, ec)) return dot_git;
  if (!fs::is_regular_file(dot_git, ec)) return std::nullopt;
  const auto line = read_first_line(dot_git);
  const std::string prefix = "gitdir: ";
  if (!line || line->rfind(prefix, 0) != 0) return std::nullopt;
  fs::path target = line->substr(prefix.size());
  if (target.is_relative()) target = root / target;
  return target;
}

std::optional<std::string> resolve_ref(const fs::path& git_dir, const std::string& ref) {
  // A worktree keeps HEAD to itself and shares refs through `commondir`.
  std::vector<fs::path> dirs = {git_dir};
  if (auto common = read_first_line(git_dir / "commondir")) {
    fs::path c = *common;
    dirs.push_back(c.is_relative() ? git_dir / c : c);
  }
  for (const auto& dir : dirs) {
    if (auto loose = read_first_line(dir / ref); loose && is_commit_id(*loose)) return loose;
  }
  for (const auto& dir : dirs) {
    std::ifstream packed(dir / "packed-refs");
    for (std::string line; std::getline(packed, line);) {
      if (line.empty() || line[0] == '#' || line[0] == '^') continue;
      const auto space = line.find(' ');
      if (space != std::string::npos && line.substr(space + 1) == ref && is_commit_id(line.substr(0, space)))
        return line.substr(0, space);
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<std::string> git_commit(const fs::path& dir) {
  std::error_code ec;
  fs::path at = fs::absolute(dir, ec);
  if (ec) return std::nullopt;
  for (;;) {
    if (auto git_dir = git_dir_of(at)) {
      const auto head = read_first_line(*git_dir / "HEAD");
      if (!head) return std::nullopt;
      if (is_commit_id(*head)) return head; // detached
      const std::string prefix = "ref: ";
      if (head->rfind(prefix, 0) != 0) return std::nullopt;
      return resolve_ref(*git_dir, head->substr(prefix.size()));
    }
    if (!at.has_parent_path() || at.parent_path() == at) return std::nullopt;
    at = at.parent_path();
  }
}

} // namespace air::mlflow
