#include "core/os/spawn_request.hpp"

#include "core/os/raw_syscall.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <csignal>
#include <initializer_list>

#ifndef SYS_close_range
#define SYS_close_range 436 // the same number on every architecture (Linux 5.9)
#endif

namespace air {

namespace {

/// The end of a failed step: errno (+ `step`) out through the pipe, then exit 127.
[[noreturn]] void fail(int pipe_fd, long negative_errno, int step = 0) {
  const int err = static_cast<int>(-negative_errno) + step;
  // One write of 4 bytes to a pipe is atomic; a short write reads as EIO.
  raw_syscall(SYS_write, pipe_fd, reinterpret_cast<long>(&err), sizeof(err));
  for (;;) raw_syscall(SYS_exit_group, 127);
}

[[noreturn]] void leave() {
  for (;;) raw_syscall(SYS_exit_group, 127);
}

/// Sets `sig` back to SIG_DFL in this process only (the child's signal
/// table is its own copy even when its memory is not).
void default_action(int sig) {
#if defined(__x86_64__)
  // The kernel's struct sigaction; all zero is SIG_DFL, no flags, empty mask.
  struct KernelSigaction {
    unsigned long handler;
    unsigned long flags;
    unsigned long restorer;
    unsigned long mask;
  };
  const KernelSigaction dfl{};
  raw_syscall(SYS_rt_sigaction, sig, reinterpret_cast<long>(&dfl), 0, sizeof(dfl.mask));
#else
  // Only the forked child runs here (k_raw_syscall_keeps_errno is false).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(sig, &dfl, nullptr);
#endif
}

/// The soft RLIMIT_NOFILE: no fd of this process is at or above it (air-run
/// only ever raises it). Asked here, in the child, and only on kernels
/// without close_range, not by the parent for every rank. 1024 if unknown.
long open_fd_limit() {
  struct {
    unsigned long long cur, max; // the kernel's struct rlimit64, on every architecture
  } limit{};
  if (raw_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&limit)) != 0) return 1024;
  constexpr unsigned long long k_most = 1ULL << 20; // the kernel's default fs.nr_open
  return static_cast<long>(limit.cur < k_most ? limit.cur : k_most);
}

/// Closes [first, last] (inclusive); close_range when the kernel has it,
/// else a plain loop up to the fd limit.
void close_fds(unsigned first, unsigned last) {
  if (first > last) return;
  if (raw_syscall(SYS_close_range, first, last, 0) == 0) return;
  const long max_fd = open_fd_limit();
  const long stop = last < static_cast<unsigned long>(max_fd) ? static_cast<long>(last) : max_fd - 1;
  for (long fd = first; fd <= stop; ++fd) raw_syscall(SYS_close, fd);
}

} // namespace

void exec_prepared(const SpawnRequest& s) {
  // Move the error pipe above 0-2 first, in case air-run was started with a
  // standard fd closed and pipe2 handed out 0, 1 or 2.
  const long err_fd = raw_syscall(SYS_fcntl, s.exec_error_fd, F_DUPFD_CLOEXEC, 3);
  if (err_fd < 0) leave();

  // Join the run's cgroup before anything else, so every process this rank
  // ever starts is born in it. "0" moves the writer. A refusal is not fatal:
  // the parent notices (Containment::rank_confirmed) and falls back.
  if (s.cgroup_procs_fd >= 0) raw_syscall(SYS_write, s.cgroup_procs_fd, reinterpret_cast<long>("0"), 1);

  // Die with air-run, even on `kill -9`. The parent may already be gone
  // before prctl took effect; then nobody would signal us, so leave now.
  if (const long r = raw_syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL); r < 0)
    fail(static_cast<int>(err_fd), r);
  if (raw_syscall(SYS_getppid) != s.parent) leave();

  // Own process group, so teardown can signal the rank and its descendants
  // (DataLoader workers) as one, and the terminal's Ctrl-C does not reach it
  // directly (air-run forwards it). The parent makes the same call.
  if (const long r = raw_syscall(SYS_setpgid, 0, 0); r < 0) fail(static_cast<int>(err_fd), r);

  // --- Placement: CPU affinity and NUMA memory policy, when prepared -------
  if (s.has_cpu_affinity) {
    const long r = raw_syscall(SYS_sched_setaffinity, 0, sizeof(s.cpu_affinity),
                               reinterpret_cast<long>(&s.cpu_affinity));
    if (r < 0) fail(static_cast<int>(err_fd), r, k_failed_affinity);
  }
  if (s.has_mem_policy) {
    const long r = raw_syscall(SYS_set_mempolicy, s.mem_policy_mode, reinterpret_cast<long>(s.mem_nodemask),
                               static_cast<long>(s.mem_maxnode));
    if (r < 0) fail(static_cast<int>(err_fd), r, k_failed_mempolicy);
  }
  // --- end of placement ------------------------------------------------------

  if (s.cwd != nullptr) {
    if (const long r = raw_syscall(SYS_chdir, reinterpret_cast<long>(s.cwd)); r < 0)
      fail(static_cast<int>(err_fd), r, k_failed_chdir);
  }

  // Ignored dispositions and the blocked mask survive exec; air-run blocks
  // its supervised signals and ignores SIGPIPE, the rank must not inherit
  // that. The parent blocked every signal before the child was born, so no
  // handler of air-run's can run here before its reset.
  for (int sig = 1; sig <= 64; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP && ((s.reset_signals >> (sig - 1)) & 1U) != 0) default_action(sig);
  }
  const unsigned long empty = 0;
  raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&empty), 0, sizeof(empty));

  // Lift the sources above 2 before dup3 so no dup3 overwrites a source.
  const long in = raw_syscall(SYS_fcntl, s.stdin_fd, F_DUPFD_CLOEXEC, 3);
  const long out = raw_syscall(SYS_fcntl, s.stdout_fd, F_DUPFD_CLOEXEC, 3);
  const long err = raw_syscall(SYS_fcntl, s.stderr_fd, F_DUPFD_CLOEXEC, 3);
  for (long r : {in, out, err}) {
    if (r < 0) fail(static_cast<int>(err_fd), r);
  }
  // dup3 without O_CLOEXEC clears it on the target, so 0-2 survive exec.
  for (int target = 0; target < 3; ++target) {
    const long source = target == 0 ? in : target == 1 ? out : err;
    if (const long r = raw_syscall(SYS_dup3, source, target, 0); r < 0) fail(static_cast<int>(err_fd), r);
  }

  // Defence in depth: everything is O_CLOEXEC already, but a library may
  // have opened an fd without it. Keep only 0-2 and the error pipe.
  const auto keep = static_cast<unsigned>(err_fd);
  close_fds(3, keep - 1);
  close_fds(keep + 1, ~0U);

  // Last, once no new fd is needed: the rank's soft limit may be below the
  // fds this child inherited. Best effort: a higher limit harms no one.
  if (s.restore_open_files) {
#if defined(__x86_64__)
    raw_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, reinterpret_cast<long>(&s.open_files), 0);
#else
    ::setrlimit(RLIMIT_NOFILE, &s.open_files); // a forked child only
#endif
  }

  const long r = raw_syscall(SYS_execve, reinterpret_cast<long>(s.path), reinterpret_cast<long>(s.argv),
                             reinterpret_cast<long>(s.envp));
  fail(static_cast<int>(err_fd), r);
}

} // namespace air
