#include "core/os/containment.hpp"

#include "core/os/proc_events.hpp"
#include "core/os/proc_table.hpp"
#include "core/os/watchdog.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
  c->spared_ = options.spared;
  c->own_session_ = ::getsid(0);
  c->own_group_ = ::getpgrp();
  if (options.cgroup && cgroup_wanted()) {
    if (auto group = RunCgroup::create()) c->cgroup_ = std::move(*group);
  }
  if (options.watchdog) {
    // Without a cgroup, the kernel's process events (where it gives them)
    // tell the watchdog of every fork below air-run at once. Subscribed
    // before the watchdog and the ranks are forked, so none goes unseen.
    const UniqueFd events = c->cgroup_.active() ? UniqueFd() : open_proc_events();
    c->watchdog_ =
        fork_watchdog(c->watch_fd_, c->cgroup_.dir(), options.grace, events.get(), options.private_dir);
  }
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

/// Notes `e`'s session and group when a process of the run made them.
void Containment::learn(const ProcEntry& e) {
  const pid_t self = ::getpid();
  if (e.sid > 0 && e.sid != own_session_ && e.sid != self && e.sid != watchdog_ &&
      sessions_.insert(e.sid).second)
    send(k_watch_session, e.sid, 0);
  if (e.pgid > 0 && e.pgid != own_group_ && e.pgid != self && e.pgid != watchdog_ &&
      groups_.count(e.pgid) == 0 && made_groups_.insert(e.pgid).second)
    send(k_watch_group, e.pgid, 0);
}

/// Forgets the sessions and groups that `table` shows empty: once empty, the
/// id may be given to a process of someone else's.
void Containment::forget_emptied(const std::vector<ProcEntry>& table) {
  std::set<pid_t> live_sessions, live_groups;
  for (const auto& e : table) {
    if (e.zombie) continue;
    live_sessions.insert(e.sid);
    live_groups.insert(e.pgid);
  }
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    // Its leader's group (same id) may outlive what a scan shows of it.
    if (live_sessions.count(*it) != 0 || ::kill(-*it, 0) == 0 || errno != ESRCH) {
      ++it;
      continue;
    }
    send(k_watch_session_gone, *it, 0);
    it = sessions_.erase(it);
  }
  for (auto it = made_groups_.begin(); it != made_groups_.end();) {
    // kill(-g, 0) asks the kernel, which a /proc scan cannot match: a process
    // that changes its pid every few ms slips past a scan of a busy host.
    if (live_groups.count(*it) != 0 || ::kill(-*it, 0) == 0 || errno != ESRCH) {
      ++it;
      continue;
    }
    send(k_watch_group_gone, *it, 0);
    it = made_groups_.erase(it);
  }
}

void Containment::record_descendants() {
  const auto now = Clock::now();
  if (now - last_scan_ < k_scan_interval) return;
  last_scan_ = now;
  if (cgroup_.active()) {
    // Every process of the run is a member: no /proc scan. (cgroup.kill
    // ends them all anyway; the sessions are for a cgroup given up later.)
    std::vector<ProcEntry> members;
    for (const pid_t p : cgroup_.members()) {
      ProcEntry e;
      if (read_proc_entry(p, e) && !e.zombie) members.push_back(e);
    }
    for (const auto& e : members) learn(e);
    forget_emptied(members);
    return;
  }
  const auto table = read_proc_table();
  for (const auto& e : live_descendants(table, {::getpid()}, left_alone())) {
    learn(e);
    if (watch_fd_ >= 0 && told_.insert({e.pid, e.start}).second) send(k_watch_process, e.pid, e.start);
  }
  forget_emptied(table);
  if (told_.size() > 65536) told_.clear(); // bounded; a re-send is harmless
}

std::vector<ProcEntry> Containment::targets() const {
  std::vector<ProcEntry> found;
  std::set<pid_t> seen;
  const auto add = [&](const ProcEntry& e) {
    if (e.pid != ::getpid() && e.pid != watchdog_ && seen.insert(e.pid).second) found.push_back(e);
  };
  // Every rank was born in the cgroup (checked on the first), so everything
  // they started is in it: its member list is the answer, no /proc scan.
  const bool scan = !cgroup_.active() || !cgroup_checked_ || !sessions_.empty() || !made_groups_.empty();
  if (scan) {
    const auto table = read_proc_table();
    if (!cgroup_.active() || !cgroup_checked_)
      for (const auto& e : live_descendants(table, {::getpid()}, left_alone())) add(e);
    for (const auto& e : members_of(table, sessions_, made_groups_)) add(e);
  }
  for (const pid_t p : cgroup_.members()) {
    ProcEntry e;
    if (read_proc_entry(p, e) && !e.zombie) add(e);
  }
  return found;
}

std::vector<pid_t> Containment::left_alone() const {
  std::vector<pid_t> pids = spared_;
  pids.push_back(watchdog_);
  return pids;
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
  swept_.clear();
  reap_adopted();
  // The groups the run made, and the sessions' own groups, are asked of the
  // kernel itself (kill(-g, 0)) too: a process that changes its pid every
  // few ms can slip past every scan of /proc on a busy host.
  const auto groups_left = [&] {
    std::set<pid_t> ids(made_groups_.begin(), made_groups_.end());
    ids.insert(sessions_.begin(), sessions_.end());
    std::vector<pid_t> alive;
    for (const pid_t g : ids)
      if (g != own_group_ && ::kill(-g, 0) == 0) alive.push_back(g);
    return alive;
  };
  auto left = targets();
  auto groups = groups_left();
  std::size_t found = left.size();
  for (const pid_t g : groups) { // a group none of `left` is in holds at least one more
    const bool seen = std::any_of(left.begin(), left.end(), [&](const ProcEntry& e) { return e.pgid == g; });
    if (!seen) ++found;
  }
  if (found == 0) return 0;
  for (const auto& e : left)
    if (swept_.size() < 10) swept_.push_back(describe_process(e.pid));
  // SIGTERM to each process once, a child forked during the grace period too.
  std::set<std::pair<pid_t, std::uint64_t>> termed;
  const auto term_new = [&] {
    for (const auto& e : left) {
      learn(e);
      if (termed.insert({e.pid, e.start}).second) ::kill(e.pid, SIGTERM);
    }
  };
  for (const pid_t g : groups) ::kill(-g, SIGTERM);
  term_new();
  const auto deadline = Clock::now() + grace;
  while ((!left.empty() || !groups.empty()) && Clock::now() < deadline) {
    ::poll(nullptr, 0, 20);
    reap_adopted();
    left = targets();
    groups = groups_left();
    term_new();
  }
  // SIGKILL until none is left. Each group that still has a member is killed
  // as a whole: that reaches a child forked meanwhile, so a process that
  // keeps forking (and its parent exiting) cannot stay one step ahead.
  const auto give_up = Clock::now() + k_kill_wait;
  while (!left.empty() || !groups.empty()) {
    for (const pid_t g : groups) ::kill(-g, SIGKILL);
    cgroup_.kill_all();
    for (const auto& e : left) {
      learn(e);
      if (e.pgid != own_group_) ::kill(-e.pgid, SIGKILL);
      ::kill(e.pid, SIGKILL);
    }
    ::poll(nullptr, 0, 10);
    reap_adopted();
    left = targets();
    groups = groups_left();
    if (Clock::now() >= give_up) break;
  }
  return found;
}

} // namespace air
