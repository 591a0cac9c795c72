#pragma once

#include "core/base/error.hpp"
#include "core/base/unique_fd.hpp"

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace air {

/// A cgroup v2 directory that air-run creates below its own cgroup for one
/// run's ranks. Every process a rank starts stays in it whatever it does
/// (setsid, double fork, daemonizing), so `cgroup.kill` ends them all at
/// once. Needs a writable cgroup v2 tree (root, or a systemd-delegated
/// subtree) and Linux 5.14 for cgroup.kill; create() says why not otherwise.
class RunCgroup {
public:
  /// Creates "<own cgroup>/air-run-<pid>" and opens its cgroup.procs for the
  /// ranks to join. Errors (the caller falls back to process groups): no
  /// cgroup v2 mount, a cgroup tree that is not writable, no cgroup.kill.
  static Expected<RunCgroup> create();

  RunCgroup() = default;
  RunCgroup(RunCgroup&& other) noexcept
      : dir_(std::exchange(other.dir_, {})), relative_(std::move(other.relative_)),
        procs_(std::move(other.procs_)), dir_fd_(std::move(other.dir_fd_)) {}
  RunCgroup& operator=(RunCgroup&& other) noexcept {
    if (this != &other) {
      remove();
      dir_ = std::exchange(other.dir_, {});
      relative_ = std::move(other.relative_);
      procs_ = std::move(other.procs_);
      dir_fd_ = std::move(other.dir_fd_);
    }
    return *this;
  }
  RunCgroup(const RunCgroup&) = delete;
  RunCgroup& operator=(const RunCgroup&) = delete;
  ~RunCgroup();

  bool active() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  /// Write end of cgroup.procs, close-on-exec: a child writes "0" to it
  /// before exec to move itself in (async-signal-safe, so before it can fork).
  int procs_fd() const { return procs_.get(); }
  /// The directory, for clone3's CLONE_INTO_CGROUP.
  int dir_fd() const { return dir_fd_.get(); }

  /// Whether `pid` is a member (reads /proc/<pid>/cgroup).
  bool contains(pid_t pid) const;
  /// The processes in it now.
  std::vector<pid_t> members() const;
  /// SIGKILLs every member through cgroup.kill.
  void kill_all() const;
  /// Removes the directory once empty; false while members are left.
  bool remove();
  /// Forgets the directory without removing it (a forked child's copy).
  void release() { dir_.clear(); }

private:
  std::string dir_;
  std::string relative_; ///< the path as /proc/<pid>/cgroup shows it
  UniqueFd procs_;
  UniqueFd dir_fd_;
};

/// The cgroup v2 mount point and air-run's own cgroup directory under it,
/// from /proc/self/mountinfo and /proc/self/cgroup texts. Empty when there
/// is no cgroup v2 hierarchy or air-run's cgroup lies outside the mount.
std::string cgroup_v2_dir(std::string_view mountinfo, std::string_view proc_self_cgroup);

/// Members listed in a cgroup.procs text.
std::vector<pid_t> parse_cgroup_procs(std::string_view text);

} // namespace air
