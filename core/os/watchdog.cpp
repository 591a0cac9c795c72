#include "core/os/watchdog.hpp"

#include "core/os/host.hpp"
#include "core/os/proc_events.hpp"
#include "core/os/proc_table.hpp"
#include "core/os/run_cgroup.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

struct Watched {
  std::set<pid_t> groups;
  std::set<pid_t> sessions;
  std::set<std::pair<pid_t, std::uint64_t>> processes;
  std::string cgroup_dir;
  std::string private_dir; ///< removed once everything is gone (empty: none)
  pid_t own_session = -1;  ///< air-run's session and group: never the run's to end
  pid_t own_group = -1;
  pid_t air_run = -1;
  int events_fd = -1; ///< the kernel's process events, or -1
  /// Every process forked below air-run that the events told of, by pid: its
  /// start time (0: it was gone before it could be read), until it exits.
  std::unordered_map<pid_t, std::uint64_t> forked;
};

/// Takes in the process events waiting: a fork by air-run or by a process
/// forked below it adds the child, an exit removes it.
void follow_forks(Watched& w) {
  if (w.events_fd < 0) return;
  const pid_t self = ::getpid();
  ProcEventHandlers handlers;
  handlers.process_forked = [&](pid_t parent, pid_t child) {
    if (child == self) return;
    ProcEntry e;
    if (parent != w.air_run) {
      const auto known = w.forked.find(parent);
      if (known == w.forked.end()) return;
      // Its exit may have been among dropped events and the pid reused since.
      if (known->second != 0 && read_proc_entry(parent, e) && e.start != known->second) {
        w.forked.erase(known);
        return;
      }
    }
    w.forked[child] = read_proc_entry(child, e) ? e.start : 0;
  };
  handlers.process_exited = [&](pid_t pid) { w.forked.erase(pid); };
  read_proc_events(w.events_fd, handlers);
}

/// Everything of the run still alive: group and session members, recorded
/// processes that are still the same process, cgroup members, and all their
/// descendants. The sessions and groups of what it finds join `w`.
std::set<pid_t> run_processes(Watched& w) {
  follow_forks(w);
  const auto table = read_proc_table();
  const pid_t self = ::getpid();
  std::vector<pid_t> roots;
  std::set<pid_t> cgroup_members;
  if (!w.cgroup_dir.empty()) {
    std::string text;
    const int fd = ::open((w.cgroup_dir + "/cgroup.procs").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<std::size_t>(n));
      ::close(fd);
    }
    for (const pid_t p : parse_cgroup_procs(text)) cgroup_members.insert(p);
  }
  std::set<pid_t> found;
  std::vector<ProcEntry> live;
  for (const auto& e : table) {
    const bool in_group = w.groups.count(e.pgid) != 0 || w.sessions.count(e.sid) != 0;
    const auto fork_seen = w.forked.find(e.pid);
    const bool recorded = w.processes.count({e.pid, e.start}) != 0 ||
                          (fork_seen != w.forked.end() && fork_seen->second == e.start && e.start != 0);
    if (!in_group && !recorded && cgroup_members.count(e.pid) == 0) continue;
    roots.push_back(e.pid);
    if (!e.zombie && e.pid != self && found.insert(e.pid).second) live.push_back(e);
  }
  for (const auto& e : live_descendants(table, roots, {self}))
    if (found.insert(e.pid).second) live.push_back(e);
  // A process that hops from pid to pid keeps its session and group: follow those.
  for (const auto& e : live) {
    if (e.sid > 0 && e.sid != w.own_session && e.sid != self) w.sessions.insert(e.sid);
    if (e.pgid > 0 && e.pgid != w.own_group && e.pgid != self) w.groups.insert(e.pgid);
  }
  return found;
}

void kill_cgroup(const std::string& dir) {
  if (dir.empty()) return;
  const int fd = ::open((dir + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  [[maybe_unused]] const ssize_t n = ::write(fd, "1", 1);
  ::close(fd);
}

void pause_ms(int ms) { ::poll(nullptr, 0, ms); }

/// air-run is gone: end everything it started.
void end_run(Watched& w, std::chrono::milliseconds grace) {
  for (const pid_t g : w.groups) ::kill(-g, SIGTERM);
  std::set<pid_t> signalled;
  const auto deadline = Clock::now() + grace;
  for (;;) {
    const auto left = run_processes(w);
    if (left.empty()) break;
    for (const pid_t p : left)
      if (signalled.insert(p).second) ::kill(p, SIGTERM);
    if (Clock::now() >= deadline) break;
    pause_ms(50);
  }
  // SIGKILL until nothing is left. A group's kill reaches a child forked
  // meanwhile too (as a cgroup's does), so a process that keeps forking in
  // its group is gone in a round or two; bounded all the same.
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    kill_cgroup(w.cgroup_dir);
    bool group_left = false;
    for (const pid_t g : w.groups) group_left = ::kill(-g, SIGKILL) == 0 || group_left;
    // A session's first group (its id) is asked of the kernel too: a process
    // that keeps changing its pid slips past a scan of a busy host.
    for (const pid_t sid : w.sessions) group_left = ::kill(-sid, SIGKILL) == 0 || group_left;
    const auto left = run_processes(w);
    if ((left.empty() && !group_left) || Clock::now() >= give_up) break;
    for (const pid_t p : left) ::kill(p, SIGKILL);
    pause_ms(20);
  }
  if (!w.cgroup_dir.empty()) {
    for (int i = 0; i < 100 && ::rmdir(w.cgroup_dir.c_str()) != 0 && errno == EBUSY; ++i) pause_ms(20);
  }
  // The ranks' result, error and progress files and the Python shim: no one
  // reads them now, and a killed air-run would leave them in $TMPDIR.
  if (!w.private_dir.empty()) remove_tree(w.private_dir);
}

/// Keeps the set of recorded processes bounded on long runs: forgets those
/// that have ended (their pid now names nothing, or another process).
void forget_ended(Watched& w) {
  for (auto it = w.processes.begin(); it != w.processes.end();) {
    ProcEntry e;
    if (!read_proc_entry(it->first, e) || e.start != it->second || e.zombie)
      it = w.processes.erase(it);
    else
      ++it;
  }
  // Exits missed (events dropped) would leave entries behind.
  for (auto it = w.forked.begin(); it != w.forked.end();) {
    ProcEntry e;
    if (!read_proc_entry(it->first, e) || e.start != it->second)
      it = w.forked.erase(it);
    else
      ++it;
  }
}

/// Closes every fd from `first` on. The watchdog outlives air-run by up to the
/// grace period: a socket it held (a control connection) would stay open that
/// long, and the node at its other end would not see this one go.
void close_fds_from(int first) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, 0U) == 0) return;
#endif
  const long max_fd = ::sysconf(_SC_OPEN_MAX);
  for (long fd = first; fd < (max_fd > 0 ? max_fd : 1024); ++fd) ::close(static_cast<int>(fd));
}

[[noreturn]] void watchdog_main(int read_fd, Watched w, std::chrono::milliseconds grace) {
  w.own_session = ::getsid(0); // air-run's, until the next line
  w.own_group = ::getpgrp();
  ::setsid();
  ::prctl(PR_SET_NAME, "air-run-watch");
  struct sigaction act {};
  sigemptyset(&act.sa_mask);
  act.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2})
    ::sigaction(sig, &act, nullptr);
  act.sa_handler = SIG_DFL;
  for (int sig : {SIGTERM, SIGCHLD}) ::sigaction(sig, &act, nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  [[maybe_unused]] const int rc = ::chdir("/");

  std::size_t next_prune = 4096;
  WatchdogRecord rec;
  std::size_t have = 0;
  pollfd fds[2] = {{read_fd, POLLIN, 0}, {w.events_fd, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, w.events_fd >= 0 ? 2 : 1, -1) < 0) continue; // EINTR
    if (w.events_fd >= 0 && fds[1].revents != 0) follow_forks(w);
    if (fds[0].revents == 0) continue;
    const ssize_t n = ::read(read_fd, reinterpret_cast<char*>(&rec) + have, sizeof(rec) - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; // EOF: air-run has gone, one way or another
    have += static_cast<std::size_t>(n);
    if (have < sizeof(rec)) continue;
    have = 0;
    if (rec.type == k_watch_end) _exit(0);
    if (rec.type == k_watch_group && rec.pid > 0) w.groups.insert(rec.pid);
    if (rec.type == k_watch_process && rec.pid > 0) w.processes.insert({rec.pid, rec.start});
    if (rec.type == k_watch_session && rec.pid > 0) w.sessions.insert(rec.pid);
    if (rec.type == k_watch_session_gone) w.sessions.erase(rec.pid);
    if (rec.type == k_watch_group_gone) w.groups.erase(rec.pid);
    if (w.processes.size() + w.forked.size() >= next_prune) {
      forget_ended(w);
      next_prune = std::max<std::size_t>(4096, (w.processes.size() + w.forked.size()) * 2);
    }
  }
  // air-run's pid is free now: a process that gets it is no one's of the run.
  follow_forks(w);
  w.air_run = -1;
  end_run(w, grace);
  _exit(0);
}

} // namespace

pid_t fork_watchdog(int& write_fd, const std::string& cgroup_dir, std::chrono::milliseconds grace,
                    int events_fd, const std::string& private_dir) {
  write_fd = -1;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return -1;
  }
  Watched watched;
  watched.cgroup_dir = cgroup_dir;
  watched.private_dir = private_dir;
  watched.air_run = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    ::close(null_fd);
    return -1;
  }
  if (pid == 0) {
    // Only the pipe's read end (as fd 3), the events socket (as fd 4, when
    // there is one) and /dev/null on 0-2: holding one of air-run's fds (its
    // stdout pipe, a socket) would keep it open past air-run.
    const int keep = ::fcntl(fds[0], F_DUPFD_CLOEXEC, 10);
    const int keep_events = events_fd >= 0 ? ::fcntl(events_fd, F_DUPFD_CLOEXEC, 10) : -1;
    if (keep < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(null_fd, 1) < 0 || ::dup2(null_fd, 2) < 0) _exit(1);
    if (::dup2(keep, 3) < 0) _exit(1);
    watched.events_fd = keep_events >= 0 && ::dup2(keep_events, 4) == 4 ? 4 : -1;
    // Without an events socket, fd 4 is still whatever air-run had there
    // (often a control connection): it goes too.
    close_fds_from(watched.events_fd == 4 ? 5 : 4);
    watchdog_main(3, std::move(watched), grace);
  }
  ::close(fds[0]);
  ::close(null_fd);
  const int flags = ::fcntl(fds[1], F_GETFL);
  ::fcntl(fds[1], F_SETFL, flags | O_NONBLOCK);
  write_fd = fds[1];
  return pid;
}

} // namespace air
