// Exits: reaping the ranks and judging the root cause.
#include "core/run/exits.hpp"

#include "core/os/containment.hpp"
#include "core/os/oom.hpp"
#include "core/run/error_file.hpp"
#include "core/run/signal_actions.hpp"
#include "core/run/stdin_relay.hpp"

#include <fmt/format.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>

namespace air {

namespace {

/// When the first rank to fail reports a lost peer (core/run/lost_peer.hpp), how
/// long to wait for the rank that caused it before the teardown: the cause
/// closes its connections when it starts to exit, and a Python rank with torch
/// loaded takes some hundreds of milliseconds from there to its end.
constexpr auto k_settle_time = std::chrono::seconds(1);

double seconds_of(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

} // namespace

void Exits::read_oom_baseline() { oom_baseline_ = read_oom_kill_count(); }

void Exits::watch_run_cgroup(const std::string& run_cgroup_dir) {
  if (const auto count = read_run_cgroup_oom_kills(run_cgroup_dir)) {
    oom_cgroup_dir_ = run_cgroup_dir;
    oom_baseline_ = count;
  }
}

std::uint64_t Exits::take_oom_kills() const {
  if (!oom_baseline_) return 0;
  const auto now =
      oom_cgroup_dir_.empty() ? read_oom_kill_count() : read_run_cgroup_oom_kills(oom_cgroup_dir_);
  if (!now || *now <= *oom_baseline_) return 0;
  const std::uint64_t kills = *now - *oom_baseline_;
  oom_baseline_ = now;
  return kills;
}

std::vector<RankState*> Exits::reap(Containment* containment, StdinRelay& stdin) {
  std::vector<RankState*> ended;
  // Runs every iteration, not only after a SIGCHLD (which can be lost).
  // Peek (WNOWAIT) at which child exited and reap exactly that pid, so a
  // wake costs O(exits) system calls rather than one wait4 per live rank;
  // with 1024 ranks the scan made start-up quadratic. Only our own pids are
  // reaped: a child we do not know falls back to the scan.
  for (;;) {
    siginfo_t info{};
    const int rc = ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || info.si_pid == 0) break;
    RankState* r = ranks_.by_pid(info.si_pid);
    if (r == nullptr) {
      if (containment && containment->is_watchdog(info.si_pid)) containment->watchdog_gone();
      int ignored = 0;
      if (::waitpid(info.si_pid, &ignored, WNOHANG) <= 0) {
        // Not ours to reap after all; take the ranks' exits.
        for (auto& rank : ranks_)
          if (rank.running()) reap_one(rank, ended, stdin);
        break;
      }
      continue;
    }
    if (!reap_one(*r, ended, stdin)) break;
  }
  return ended;
}

bool Exits::reap_one(RankState& r, std::vector<RankState*>& ended, StdinRelay& stdin) {
  int wstatus = 0;
  rusage usage{};
  pid_t got;
  do {
    got = ::wait4(r.pid, &wstatus, WNOHANG, &usage);
  } while (got < 0 && errno == EINTR);
  if (got == 0) return false;
  RankOutcome& o = out_.ranks[r.index];
  r.reaped = true;
  r.reaped_at = Clock::now();
  if (r.reads_stdin) stdin.stop();
  ranks_.forget(r);
  o.ended_at = r.reaped_at;
  o.end_order = ++end_counter_;
  if (got == r.pid) {
    o.status = ExitStatus::from_wait_status(wstatus);
    o.user_s = seconds_of(usage.ru_utime);
    o.sys_s = seconds_of(usage.ru_stime);
    o.max_rss_kb = usage.ru_maxrss; // kilobytes on Linux
  }
  // else ECHILD: someone else reaped our child; the status stays unknown.
  // Judged by how it ended, not by whether the signal had gone out: a rank
  // may exit with its own code an instant before or after the teardown began.
  // An interruption is the exception: the user's signal, passed on, is what
  // ended every rank still running, whatever it exits with (Python turns
  // SIGINT into KeyboardInterrupt and exits 1; a peer then loses its
  // connection and fails too).
  // A rank asked to stop at a step was sent no signal: exiting 0 is
  // stopping when asked; dying of a SIGTERM is someone else's doing (a
  // scheduler that signals every process), not air-run's.
  o.stopped_by_air_run =
      out_.status == RunOutcome::Status::interrupted
          ? r.teardown_signal != 0
          : ended_by_teardown_signal(o.status, r.teardown_signal) || (r.asked_to_stop && o.status.success());
  if (o.killed && !(o.status.kind == ExitStatus::Kind::signaled && o.status.signal == SIGKILL))
    o.killed = false;
  ended.push_back(&r);
  return true;
}

void Exits::never_ran(RankState& r, int code, const std::string& error) {
  RankOutcome& o = out_.ranks[r.index];
  r.reaped = true;
  r.reaped_at = Clock::now();
  o.status = ExitStatus::exited_with(code);
  o.spawn_error = error;
  o.end_order = ++end_counter_;
  o.ended_at = r.reaped_at;
}

std::string Exits::failure_reason(RankOutcome& o, const std::string& error_file) const {
  std::string reason = "rank " + std::to_string(o.rank);
  // The OOM killer's kills since the last failing rank: the rank itself
  // (SIGKILL), or a child of it, a DataLoader worker above all, whose rank
  // then fails of something else ("DataLoader worker (pid(s) 16502) exited
  // unexpectedly"). The kernel says how many, not whom.
  const std::uint64_t oom_kills = take_oom_kills();
  const bool sigkill = o.status.kind == ExitStatus::Kind::signaled && o.status.signal == SIGKILL;
  if (oom_kills > 0) o.oom_killed = true;
  const std::string child_killed =
      oom_kills > 0 && !sigkill
          ? fmt::format("; the OOM killer killed {} of the run's processes meanwhile (a child of a rank, "
                        "such as a DataLoader worker)",
                        oom_kills == 1 ? std::string("one") : std::to_string(oom_kills))
          : std::string();
  // A rank that exited on an exception it recorded (the rank shim records
  // every Python rank's; torch's @record too): the exception is the reason.
  if (o.status.kind == ExitStatus::Kind::exited) {
    if (const auto record = read_error_file(error_file)) {
      if (std::string headline = exception_headline(*record); !headline.empty())
        return reason + " failed: " + headline + child_killed;
    }
  }
  if (o.oom_killed && sigkill)
    reason += " was killed by the OOM killer";
  else if (o.status.kind == ExitStatus::Kind::signaled)
    reason += " was killed by " + o.status.describe();
  else if (o.status.kind == ExitStatus::Kind::exited)
    reason += " exited with " + o.status.describe();
  else
    reason += " ended with an unknown status (reaped elsewhere)";
  return reason + child_killed;
}

bool Exits::fail(const RankState& r, std::string reason, bool lost_peer, Clock::time_point now) {
  if (out_.status == RunOutcome::Status::succeeded) {
    out_.status = RunOutcome::Status::failed;
  } else if (!settle_deadline_ || lost_peer) {
    return false; // not the first failure, and not the cause the first one was waiting for
  }
  out_.root_cause_rank = r.plan->rank;
  out_.reason = std::move(reason);
  if (lost_peer) {
    // A symptom (its peer went away): the rank that caused it is probably
    // exiting right now. Tear down after it, so that it is found as the cause
    // and not stopped by our SIGTERM first.
    settle_deadline_ = now + k_settle_time;
    return false;
  }
  return true;
}

bool Exits::settle_due(Clock::time_point now, bool others_may_tell) const {
  // One rank per node ends at once; its peer's node may yet say why.
  return settle_deadline_ && (now >= *settle_deadline_ || (ranks_.all_ended() && !others_may_tell));
}

} // namespace air
