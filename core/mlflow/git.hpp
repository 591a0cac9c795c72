#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace air::mlflow {

/// The commit checked out in the git work tree holding `dir` (or one of its
/// parents), read from the repository's files without running git: HEAD, a
/// loose ref, packed-refs; worktrees (`.git` file) and detached HEADs too.
/// nullopt outside a repository, on an unborn branch, or when a file is
/// unreadable: the tag is a convenience, never a reason to fail.
std::optional<std::string> git_commit(const std::filesystem::path& dir);

} // namespace air::mlflow
