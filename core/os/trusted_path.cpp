#include "core/os/trusted_path.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace air {
namespace {

std::string mode_text(mode_t mode) { return fmt::format("{:04o}", static_cast<unsigned>(mode & 07777)); }

// The verdict on one stat result; "" when the path is trusted.
std::string distrust(const struct stat& st) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return fmt::format("is owned by uid {}, not by uid {} or root", st.st_uid, me);
  }
  const bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
  // A symlink's own mode bits mean nothing; its owner and directory do.
  if (!S_ISLNK(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_dir) {
    return fmt::format("is writable by other users (mode {})", mode_text(st.st_mode));
  }
  return {};
}

Error refuse(std::string_view what, const std::string& path, const std::string& why) {
  return usage_error(fmt::format("{} {} {}; another user could have planted or replaced what air-run "
                                 "would use there (make it yours and chmod go-w)",
                                 what, path, why));
}

} // namespace

Status check_trusted_path(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return usage_error(fmt::format("cannot check {} {}: {}", what, path, std::strerror(errno)));
  }
  if (auto why = distrust(st); !why.empty()) return refuse(what, path, why);
  return ok_status();
}

Status check_trusted_tree_root(const std::string& path, std::string_view what) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) return usage_error(fmt::format("cannot check {} {}: {}", what, path, ec.message()));
  p = p.lexically_normal();
  for (;;) {
    const std::string text = p.string();
    struct stat st {};
    if (::stat(text.c_str(), &st) != 0) {
      return usage_error(fmt::format("cannot check {} {}: {}", what, text, std::strerror(errno)));
    }
    if (auto why = distrust(st); !why.empty()) {
      return refuse(text == path ? std::string(what) : fmt::format("{}: its parent", what), text, why);
    }
    if (!p.has_relative_path()) break; // "/"
    std::filesystem::path parent = p.parent_path();
    if (parent == p) break;
    p = parent;
  }
  return ok_status();
}

Status check_trusted_contents(const std::string& dir, std::string_view what) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    return usage_error(fmt::format("cannot check {} {}: {}", what, dir, std::strerror(errno)));
  }
  if (auto why = distrust(st); !why.empty()) return refuse(what, dir, why);
  if (!S_ISDIR(st.st_mode)) return ok_status();
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir, std::filesystem::directory_options::none, ec);
  for (const std::filesystem::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().string();
    if (::lstat(entry.c_str(), &st) != 0) continue; // gone meanwhile: nothing to use
    if (S_ISLNK(st.st_mode)) continue;
    if (auto why = distrust(st); !why.empty()) return refuse(what, entry, why);
  }
  if (ec) return usage_error(fmt::format("cannot check {} {}: {}", what, dir, ec.message()));
  return ok_status();
}

Status remove_stale_file(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return ok_status();
    return usage_error(fmt::format("cannot check the {} {}: {}", what, path, std::strerror(errno)));
  }
  // Only what a run could have left: a file or a symlink, never a device.
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
    return usage_error(fmt::format("the {} {} is not a regular file; air-run leaves it alone", what, path));
  }
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return ok_status();
  return usage_error(
      fmt::format("cannot remove the {} {} left by an earlier run: {}", what, path, std::strerror(errno)));
}

} // namespace air
