#pragma once

#include "core/base/error.hpp"

#include <string>
#include <string_view>

namespace air {

/// Whether another local user could have written `path` (a file or directory),
/// judged the way ssh judges its files: the path must be owned by the user
/// air-run runs as (its effective uid) or by root, and must not be writable by
/// group or others, except a directory with the sticky bit (as /tmp), where
/// others may add names but not replace ours. Symlinks are judged by what they
/// point at. Returns a usage error naming `what`, the path, its owner and mode:
/// "log directory /x is writable by other users (mode 0777); ...".
Status check_trusted_path(const std::string& path, std::string_view what);

/// `check_trusted_path` for `path` and every directory above it up to "/", so
/// that nobody but us or root can rename a parent and swap the tree.
Status check_trusted_tree_root(const std::string& path, std::string_view what);

/// `check_trusted_path` for every file and directory under `dir` (the top
/// included), not following symlinks: of a symlink only the owner counts
/// (its mode bits mean nothing). A `dir` that is a file or symlink is judged
/// alone.
Status check_trusted_contents(const std::string& dir, std::string_view what);

/// Removes a file left at `path` by an earlier run, so that what is read back
/// later is what this run's ranks wrote. `unlink` never follows a symlink;
/// only a regular file or a symlink is removed, anything else is refused. A
/// missing file is fine; a name we cannot remove (another user's file in a
/// sticky directory) is a usage error naming it.
Status remove_stale_file(const std::string& path, std::string_view what);

} // namespace air
