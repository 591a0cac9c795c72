// The teardown: first signal, grace period, SIGKILL.
#include "core/run/teardown.hpp"

#include "core/base/duration.hpp"
#include "core/base/unique_fd.hpp"
#include "core/os/containment.hpp"
#include "core/os/signals.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>

namespace air {

namespace {

/// While tearing down, how often to check that the groups have emptied:
/// descendants are not our children, so no event says when they are gone.
constexpr auto k_group_check_interval = std::chrono::milliseconds(50);

/// Whether `pid`'s /proc/<pid>/stat says it is a live (not zombie) member
/// of process group `pgid`.
bool live_member_of(const char* pid, pid_t pgid) {
  const std::string path = std::string("/proc/") + pid + "/stat";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  char buf[512];
  ssize_t n;
  do {
    n = ::read(fd.get(), buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ppid pgrp ...": comm may contain spaces and ')'.
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return false;
  char state = 0;
  long ppid = 0;
  long pgrp = 0;
  if (std::sscanf(close_paren + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) return false;
  return pgrp == pgid && state != 'Z' && state != 'X';
}

} // namespace

void signal_group(pid_t pgid, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
}

bool group_alive(pid_t pgid) {
  // kill(-pgid, 0) answers "no" cheaply; when it says "yes" the members may
  // all be zombies waiting for their new parent to reap them, and those are
  // dead for our purpose, so /proc decides.
  if (pgid <= 0) return false;
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return true;
  bool alive = false;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (live_member_of(e->d_name, pgid)) {
      alive = true;
      break;
    }
  }
  ::closedir(dir);
  return alive;
}

std::string kill_now_hint(int sig) {
  // A SIGTERM or SIGHUP comes from a scheduler or a script, not a keyboard.
  return sig == SIGINT ? "Ctrl-C again to kill now" : "a second signal kills now";
}

std::string teardown_notice(std::size_t running, int sig, std::chrono::milliseconds grace) {
  return "air-run: stopping " + std::to_string(running) + (running == 1 ? " rank (" : " ranks (") +
         signal_name(sig) + "), up to " + format_duration(grace) + "; " + kill_now_hint(sig) + "\n";
}

bool Teardown::begin(int sig, RankTable& ranks, Containment* containment, Clock::time_point now) {
  if (active_) return false;
  active_ = true;
  grace_deadline_ = now + grace_;
  for (auto& r : ranks) {
    if (!r.spawned) continue;
    if (!r.reaped && r.teardown_signal == 0) r.teardown_signal = sig;
    signal_group(r.pid, sig);
  }
  // And what left the groups (setsid, setpgid) or lost its rank parent.
  if (containment) containment->signal_all(sig);
  return true;
}

void Teardown::begin_quietly(Clock::duration grace, Clock::time_point now) {
  active_ = true;
  grace_deadline_ = now + grace;
}

void Teardown::kill(RankTable& ranks, RunOutcome& out, Containment* containment, Clock::time_point now) {
  kill_sent_ = true;
  kill_sent_at_ = now;
  for (auto& r : ranks) {
    if (!r.spawned) continue;
    if (!r.reaped) {
      if (r.teardown_signal == 0) r.teardown_signal = SIGKILL;
      if (active_) out.ranks[r.index].killed = true; // it outlived the first signal
    }
    signal_group(r.pid, SIGKILL);
  }
  if (containment) containment->signal_all(SIGKILL);
}

std::optional<Teardown::Clock::time_point> Teardown::next_deadline(Clock::time_point now,
                                                                   bool ranks_quiet) const {
  if (!active_ || kill_sent_) return std::nullopt;
  return ranks_quiet ? std::min(grace_deadline_, now + k_group_check_interval) : grace_deadline_;
}

bool Teardown::groups_gone(const RankTable& ranks) const {
  if (!active_ || kill_sent_) return true;
  for (const auto& r : ranks)
    if (r.spawned && group_alive(r.pid)) return false;
  return true;
}

} // namespace air
