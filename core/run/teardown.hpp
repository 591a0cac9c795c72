#pragma once

#include "core/run/rank_table.hpp"

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

namespace air {

class Containment;

/// Sends `sig` to a rank's process group. The group id is the leader's pid;
/// once the leader is reaped and the group has emptied, the kernel may reuse
/// that id, so a late kill could in theory hit an unrelated group. We accept
/// that small window (it needs the pid space to wrap within the teardown)
/// because the alternative, not signalling reaped leaders' groups, would
/// leave their DataLoader workers running. ESRCH (group empty) is expected.
void signal_group(pid_t pgid, int sig);

/// Whether a live process is left in process group `pgid`: zombies waiting
/// for a parent that never reaps them (a container's PID 1) count as gone.
bool group_alive(pid_t pgid);

/// How to cut a teardown short after `sig`: "Ctrl-C again to kill now" after
/// SIGINT, "a second signal kills now" after a signal no keyboard sends.
std::string kill_now_hint(int sig);

/// "air-run: stopping 3 ranks (SIGINT), up to 30s; Ctrl-C again to kill now":
/// said at once after an interrupt, since a silent grace period looks like a hang.
std::string teardown_notice(std::size_t running, int sig, std::chrono::milliseconds grace);

/// The teardown's schedule: the first signal to every rank's group (and to
/// what left the groups), one grace deadline, then SIGKILL to all of them.
/// While it runs the loop also waits for the ranks' descendants to leave
/// their groups, which no event announces.
class Teardown {
public:
  using Clock = std::chrono::steady_clock;

  /// `grace`: from the first signal to SIGKILL (--grace-period).
  explicit Teardown(Clock::duration grace) : grace_(grace) {}

  /// Whether the teardown has begun.
  bool active() const { return active_; }
  /// Whether SIGKILL went out, and when.
  bool killed() const { return kill_sent_; }
  Clock::time_point killed_at() const { return kill_sent_at_; }
  /// When SIGKILL follows the first signal.
  Clock::time_point grace_deadline() const { return grace_deadline_; }

  /// Sends `sig` to every started rank's group (reaped leaders' too: their
  /// descendants must not linger) and to `containment`'s strays (may be
  /// null), and starts the grace period. Once per run: false when it had begun.
  bool begin(int sig, RankTable& ranks, Containment* containment, Clock::time_point now);
  /// Begins without a signal: the ranks were asked to stop otherwise
  /// (preemption) and have `grace` from `now`.
  void begin_quietly(Clock::duration grace, Clock::time_point now);
  /// SIGKILL to every started rank's group and to `containment`'s strays;
  /// ranks still running that outlived the first signal are marked killed in `out`.
  void kill(RankTable& ranks, RunOutcome& out, Containment* containment, Clock::time_point now);
  /// Whether the grace period is over and SIGKILL has yet to go out.
  bool kill_due(Clock::time_point now) const { return active_ && !kill_sent_ && now >= grace_deadline_; }
  /// When the loop must look again: the grace deadline, or soon when every
  /// rank has ended (`ranks_quiet`) and only their groups' descendants may
  /// be left. nullopt when not waiting.
  std::optional<Clock::time_point> next_deadline(Clock::time_point now, bool ranks_quiet) const;
  /// Whether the loop may end as far as the teardown goes: not begun, SIGKILL
  /// sent, or every started rank's group has emptied.
  bool groups_gone(const RankTable& ranks) const;

private:
  Clock::duration grace_;
  bool active_ = false;
  Clock::time_point grace_deadline_{};
  bool kill_sent_ = false;
  Clock::time_point kill_sent_at_{};
};

} // namespace air
