#include "core/os/run_cgroup.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sstream>

namespace air {

namespace {

std::string read_small(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > (1U << 20)) break;
  }
  ::close(fd);
  return text;
}

bool write_text(const std::string& path, std::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);
  return n == static_cast<ssize_t>(text.size());
}

/// The v2 line of /proc/<pid>/cgroup ("0::/a/b"), as "/a/b".
std::string v2_path(std::string_view proc_cgroup) {
  std::istringstream in{std::string(proc_cgroup)};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return {};
}

} // namespace

std::string cgroup_v2_dir(std::string_view mountinfo, std::string_view proc_self_cgroup) {
  const std::string own = v2_path(proc_self_cgroup);
  if (own.empty()) return {};
  std::istringstream in{std::string(mountinfo)};
  for (std::string line; std::getline(in, line);) {
    // "36 25 0:31 / /sys/fs/cgroup rw,... shared:9 - cgroup2 cgroup2 rw"
    const auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, dev, root, mount_point;
    if (!(fields >> id >> parent >> dev >> root >> mount_point)) continue;
    // The mount shows the hierarchy from `root` down; our cgroup must lie there.
    std::string rel = own;
    if (root != "/") {
      if (own.compare(0, root.size(), root) != 0 || (own.size() > root.size() && own[root.size()] != '/'))
        continue;
      rel = own.substr(root.size());
    }
    if (rel == "/") rel.clear();
    return mount_point + rel;
  }
  return {};
}

std::vector<pid_t> parse_cgroup_procs(std::string_view text) {
  std::vector<pid_t> pids;
  long value = 0;
  bool in_number = false;
  for (const char c : text) {
    if (c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      in_number = true;
    } else {
      if (in_number && value > 0) pids.push_back(static_cast<pid_t>(value));
      value = 0;
      in_number = false;
    }
  }
  if (in_number && value > 0) pids.push_back(static_cast<pid_t>(value));
  return pids;
}

Expected<RunCgroup> RunCgroup::create() {
  const std::string base = cgroup_v2_dir(read_small("/proc/self/mountinfo"), read_small("/proc/self/cgroup"));
  if (base.empty()) return Error{ErrorKind::not_found, "no cgroup v2 hierarchy"};
  const std::string name = "air-run-" + std::to_string(::getpid());
  const std::string dir = base + "/" + name;
  // EEXIST: left by an earlier air-run with this pid that was killed together
  // with its watchdog; rmdir succeeds only if it is empty, and then it is ours.
  if (::mkdir(dir.c_str(), 0755) != 0 &&
      !(errno == EEXIST && ::rmdir(dir.c_str()) == 0 && ::mkdir(dir.c_str(), 0755) == 0))
    return sys_error("mkdir " + dir, errno);
  RunCgroup group;
  group.dir_ = dir;
  group.relative_ = v2_path(read_small("/proc/self/cgroup"));
  if (group.relative_ == "/") group.relative_.clear();
  group.relative_ += "/" + name;
  struct stat st {};
  if (::stat((dir + "/cgroup.kill").c_str(), &st) != 0) {
    const int err = errno;
    group.remove();
    return sys_error("cgroup.kill in " + dir, err); // Linux before 5.14
  }
  group.procs_.reset(::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  if (!group.procs_) {
    const int err = errno;
    group.remove();
    return sys_error("open " + dir + "/cgroup.procs", err);
  }
  group.dir_fd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return group;
}

RunCgroup::~RunCgroup() { remove(); }

bool RunCgroup::contains(pid_t pid) const {
  if (!active()) return false;
  return v2_path(read_small("/proc/" + std::to_string(pid) + "/cgroup")) == relative_;
}

std::vector<pid_t> RunCgroup::members() const {
  if (!active()) return {};
  return parse_cgroup_procs(read_small(dir_ + "/cgroup.procs"));
}

void RunCgroup::kill_all() const {
  if (active()) write_text(dir_ + "/cgroup.kill", "1");
}

bool RunCgroup::remove() {
  if (!active()) return true;
  procs_.reset();
  dir_fd_.reset();
  if (::rmdir(dir_.c_str()) != 0 && errno != ENOENT) return false;
  dir_.clear();
  return true;
}

} // namespace air
