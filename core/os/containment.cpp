#include "core/os/containment.hpp"

#include "core/os/proc_table.hpp"
#include "core/os/watchdog.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

/// How often, without a cgroup, air-run tells the watchdog about new descendants.
constexpr auto k_scan_interval = std::chrono::seconds(1);
/// After SIGKILL, how long sweep() waits for the last processes to go.
constexpr auto k_kill_wait = std::chrono::seconds(5);

bool cgroup_wanted() {
  const char* v = std::getenv("AIR_RUN_CGROUP");
  if (v == nullptr) return true;
  const std::string_view s(v);
  return !(s == "off" || s == "0" || s == "no" || s == "false");
}

} // namespace

std::unique_ptr<Containment> Containment::start(const Options& options) {
  std::unique_ptr<Containment> c(new Containment());
  c->subreaper_ = ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  if (options.cgroup && cgroup_wanted()) {
    if (auto group = RunCgroup::create()) c->cgroup_ = std::move(*group);
  }
  if (options.watchdog) c->watchdog_ = fork_watchdog(c->watch_fd_, c->cgroup_.dir(), options.grace);
  return c;
}

Containment::~Containment() {
  if (watch_fd_ >= 0) {
    send(k_watch_end, 0, 0);
    ::close(watch_fd_);
  }
  // While the watchdog exits: removing a cgroup takes the kernel a few ms.
  cgroup_.remove();
  if (watchdog_ > 0) {
    // It leaves as soon as it reads the goodbye; bounded all the same. A
    // pidfd says exactly when (Linux 5.3); else short naps.
#ifdef SYS_pidfd_open
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, watchdog_, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      while (::poll(&p, 1, 1000) < 0 && errno == EINTR) {
      }
      ::close(pidfd);
    }
#endif
    for (int i = 0; i < 1000; ++i) {
      const pid_t got = ::waitpid(watchdog_, nullptr, WNOHANG);
      if (got == watchdog_ || (got < 0 && errno != EINTR)) {
        watchdog_ = -1;
        break;
      }
      ::poll(nullptr, 0, 1);
    }
    if (watchdog_ > 0) {
      ::kill(watchdog_, SIGKILL);
      ::waitpid(watchdog_, nullptr, 0);
    }
  }
  if (subreaper_) ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

std::string Containment::describe() const {
  return cgroup_.active() ? "cgroup " + cgroup_.dir() : "process groups";
}

void Containment::send(std::int32_t type, pid_t pid, std::uint64_t start) {
  if (watch_fd_ < 0) return;
  WatchdogRecord rec;
  rec.type = type;
  rec.pid = pid;
  rec.start = start;
  ssize_t n;
  do {
    n = ::write(watch_fd_, &rec, sizeof(rec));
  } while (n < 0 && errno == EINTR);
  // EAGAIN (the watchdog is behind by 4096 records) drops this one: the
  // process groups and the cgroup still cover what it described.
}

void Containment::rank_started(pid_t pid) {
  groups_.insert(pid);
  send(k_watch_group, pid, 0);
}

void Containment::rank_confirmed(pid_t pid) {
  if (cgroup_checked_ || !cgroup_.active()) return;
  cgroup_checked_ = true;
  // The kernel refused the move (cgroup delegation rules): fall back to
  // groups and scans. (If some rank did get in, rmdir fails and it stays.)
  if (!cgroup_.contains(pid)) cgroup_.remove();
}

void Containment::record_descendants() {
  if (cgroup_.active() || watch_fd_ < 0) return;
  const auto now = Clock::now();
  if (now - last_scan_ < k_scan_interval) return;
  last_scan_ = now;
  for (const auto& e : live_descendants(read_proc_table(), {::getpid()}, watchdog_)) {
    if (told_.insert({e.pid, e.start}).second) send(k_watch_process, e.pid, e.start);
  }
  if (told_.size() > 65536) told_.clear(); // bounded; a re-send is harmless
}

std::vector<ProcEntry> Containment::targets() const {
  std::vector<ProcEntry> found;
  // Every rank was born in the cgroup (checked on the first), so everything
  // they started is in it: its member list is the answer, no /proc scan.
  if (!cgroup_.active() || !cgroup_checked_)
    found = live_descendants(read_proc_table(), {::getpid()}, watchdog_);
  for (const pid_t p : cgroup_.members()) {
    ProcEntry e;
    if (read_proc_entry(p, e) && !e.zombie) found.push_back(e); // a duplicate is signalled twice: harmless
  }
  return found;
}

void Containment::signal_all(int sig) {
  for (const auto& e : targets())
    if (groups_.count(e.pgid) == 0) ::kill(e.pid, sig);
}

void Containment::reap_adopted() {
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    if (info.si_pid == watchdog_) watchdog_ = -1; // died early; nothing to wait for later
    ::waitpid(info.si_pid, nullptr, WNOHANG);
  }
}

std::size_t Containment::sweep(std::chrono::milliseconds grace) {
  reap_adopted();
  auto left = targets();
  const std::size_t found = left.size();
  if (left.empty()) return 0;
  for (const auto& e : left) ::kill(e.pid, SIGTERM);
  const auto deadline = Clock::now() + grace;
  while (!left.empty() && Clock::now() < deadline) {
    ::poll(nullptr, 0, 20);
    reap_adopted();
    left = targets();
  }
  const auto give_up = Clock::now() + k_kill_wait;
  while (!left.empty()) {
    cgroup_.kill_all();
    for (const auto& e : left) ::kill(e.pid, SIGKILL);
    ::poll(nullptr, 0, 10);
    reap_adopted();
    left = targets();
    if (Clock::now() >= give_up) break;
  }
  return found;
}

} // namespace air
