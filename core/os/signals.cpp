#include "core/os/signals.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace air {

sigset_t supervised_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  sigaddset(&set, SIGWINCH); // the terminal was resized: the ranks' terminals follow
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGQUIT}) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;
    sigaddset(&set, sig);
  }
  return set;
}

Expected<std::unique_ptr<SignalGuard>> SignalGuard::install() {
  std::unique_ptr<SignalGuard> guard(new SignalGuard());
  const sigset_t set = supervised_signals();
  // Block before anything else: a signal that arrives from here on waits in
  // the kernel until the loop reads it from the signalfd.
  if (sigprocmask(SIG_BLOCK, &set, &guard->old_mask_) != 0) return sys_error("sigprocmask", errno);
  const int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    sigprocmask(SIG_SETMASK, &guard->old_mask_, nullptr);
    return sys_error("signalfd", err);
  }
  guard->fd_.reset(fd);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (sigaction(SIGCHLD, &dfl, &guard->old_chld_action_) != 0) {
    const int err = errno;
    sigprocmask(SIG_SETMASK, &guard->old_mask_, nullptr);
    return sys_error("sigaction(SIGCHLD)", err);
  }
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (sigaction(SIGPIPE, &ignore, &guard->old_pipe_action_) != 0) {
    const int err = errno;
    sigaction(SIGCHLD, &guard->old_chld_action_, nullptr);
    sigprocmask(SIG_SETMASK, &guard->old_mask_, nullptr);
    return sys_error("sigaction(SIGPIPE)", err);
  }
  return guard;
}

SignalGuard::~SignalGuard() {
  // Consume what is still queued: the run is over, and unblocking a pending
  // SIGINT now would kill air-run before it can report the outcome.
  read_pending();
  sigaction(SIGPIPE, &old_pipe_action_, nullptr);
  sigaction(SIGCHLD, &old_chld_action_, nullptr);
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::vector<int> SignalGuard::read_pending() {
  std::vector<int> signals;
  signalfd_siginfo info[16];
  for (;;) {
    const ssize_t n = ::read(fd_.get(), info, sizeof(info));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; // EAGAIN: queue empty
    const auto count = static_cast<std::size_t>(n) / sizeof(signalfd_siginfo);
    for (std::size_t i = 0; i < count; ++i) signals.push_back(static_cast<int>(info[i].ssi_signo));
  }
  return signals;
}

Expected<InterruptWatch> InterruptWatch::open() {
  const sigset_t supervised = supervised_signals();
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    if (sigismember(&supervised, sig) == 1) sigaddset(&set, sig);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) return sys_error("pthread_sigmask", errno);
  InterruptWatch watch;
  watch.fd_.reset(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!watch.fd_) return sys_error("signalfd", errno);
  return watch;
}

int InterruptWatch::take() { return take_signal(fd_.get()); }

void die_of_signal(int signal) {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  sigaction(signal, &action, nullptr);
  std::fflush(nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal);
  ::raise(signal); // pending: it is still blocked
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::_exit(128 + signal); // a signal whose default action does not end the process
}

Status wait_readable_or_die(int fd) {
  auto watch = InterruptWatch::open();
  if (!watch) return watch.error();
  for (;;) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {watch->fd(), POLLIN, 0}};
    const int ready = ::poll(fds, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return sys_error("poll", errno);
    if (const int signal = watch->take(); signal != 0) die_of_signal(signal);
    if (fds[0].revents != 0) return ok_status();
  }
}

int take_signal(int signal_fd) {
  if (signal_fd < 0) return 0;
  signalfd_siginfo info{};
  for (;;) {
    const ssize_t n = ::read(signal_fd, &info, sizeof(info));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(info))) return 0;
    return static_cast<int>(info.ssi_signo);
  }
}

} // namespace air
