#pragma once

#include "core/base/error.hpp"
#include "core/base/unique_fd.hpp"

#include <csignal>
#include <memory>
#include <vector>

namespace air {

/// The signals the supervisor consumes through its signalfd: INT/TERM/HUP
/// (forward, then tear down), CHLD (reap), USR1/USR2 (forward only), WINCH
/// (the ranks' terminals take the new size). A
/// signal other than CHLD whose disposition is SIG_IGN when air-run starts
/// (`nohup` ignores HUP, a background job in a script ignores INT) is left
/// out, so it stays ignored as whoever started air-run asked.
sigset_t supervised_signals();

/// Scoped signal setup for the supervisor loop: blocks the supervised signals so none is lost between a check
/// and a wait, exposes them as a nonblocking close-on-exec signalfd that sits in the poll set, and ignores
/// SIGPIPE so a closed console cannot kill air-run and orphan the ranks. The destructor drains the signalfd,
/// restores the previous mask and SIGPIPE disposition, and closes the fd.
///
/// SIGCHLD is set to SIG_DFL for the duration: an inherited SIG_IGN (or
/// SA_NOCLDWAIT) would make the kernel reap the ranks itself, and their exit
/// statuses would be lost. The mask is per thread, so the process must be
/// single-threaded (air-run is) or have these signals blocked everywhere.
class SignalGuard {
public:
  /// Installs the guard. Fails (system error naming the call) only if the
  /// kernel refuses sigprocmask, signalfd or sigaction.
  static Expected<std::unique_ptr<SignalGuard>> install();

  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

  /// The signalfd to poll for POLLIN.
  int fd() const { return fd_.get(); }

  /// Reads every queued signal, in arrival order. Never blocks.
  std::vector<int> read_pending();

private:
  SignalGuard() = default;

  UniqueFd fd_;
  sigset_t old_mask_{};
  struct sigaction old_pipe_action_ {};
  struct sigaction old_chld_action_ {};
};

/// The first signal queued on `signal_fd` (a non-blocking signalfd),
/// consumed; 0 when none, and when `signal_fd` is -1. Never blocks.
int take_signal(int signal_fd);

/// Ends air-run as `signal` would have, had it not been blocked: its default
/// action restored, unblocked and raised, so the shell sees 128+N. For the
/// waits before a launch (stdin, a helper's answer) that an interrupting
/// signal ends: nothing is running that needs tearing down yet.
[[noreturn]] void die_of_signal(int signal);

/// Waits until `fd` is readable (or at its end, or in error) or an
/// interrupting signal arrives; in the latter case air-run ends of it
/// (die_of_signal). air-run blocks its signals from the start for the
/// signalfd, so a plain blocking read of a pipe whose writer never closes it
/// could not be interrupted at all. Fails only if the signalfd cannot be made.
Status wait_readable_or_die(int fd);

/// A signalfd over the interrupting signals (SIGINT, SIGTERM, SIGHUP, those
/// of `supervised_signals()`), for the waits outside the supervisor's loop:
/// the multi-node join, the agreement between restart attempts. Blocks them
/// in the calling thread (air-run's main already has) and leaves them
/// blocked, so a signal that arrives between two waits stays queued for the
/// next one or for the supervisor.
class InterruptWatch {
public:
  /// Fails (system error naming the call) only if the kernel refuses.
  static Expected<InterruptWatch> open();

  /// The descriptor to poll for POLLIN.
  int fd() const { return fd_.get(); }

  /// The first queued interrupting signal, consumed; 0 when none. Never blocks.
  int take();

private:
  UniqueFd fd_;
};

} // namespace air
