#pragma once

#include <sched.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>

namespace air {

/// Everything a new rank needs between its birth and exec, prepared by the
/// parent so that the child only makes system calls: it allocates nothing,
/// takes no lock, throws nothing and never writes errno. It may share
/// air-run's memory until exec (core/os/shared_spawn.hpp), so it must also
/// leave every byte outside its own stack as it found it. The pointers stay
/// valid until the child has exec'd or been reaped (PendingExec).
struct SpawnRequest {
  const char* path = nullptr; ///< the program, already looked up along the rank's PATH
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr; ///< chdir before exec; null: air-run's own directory
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int exec_error_fd = -1;   ///< close-on-exec pipe: the errno of a failed step (an int), or EOF at exec
  int cgroup_procs_fd = -1; ///< cgroup.procs to join, or -1 (none, or born in it already)
  pid_t parent = -1;        ///< for the PR_SET_PDEATHSIG race check
  bool restore_open_files = false; ///< give the rank back `open_files` (raise_open_file_limit)
  rlimit open_files{};
  /// Signals set back to SIG_DFL, ignored or not (bit N-1: signal N):
  /// air-run's own, and every signal with a handler when the parent looked
  /// (handled_signals(), core/os/process.hpp): a handler must never run in a
  /// child on air-run's memory. The child asks the kernel nothing (it used
  /// to query all 62, 62 system calls a rank while air-run waits). Other
  /// ignored signals stay ignored (`nohup`).
  std::uint64_t reset_signals = 0;

  // --- Placement, applied before exec when set (empty: no call) -----------
  // The per-rank CPU affinity and NUMA memory policy fill these in the
  // parent; the child only passes them on (spawn_request.cpp, "Placement").
  bool has_cpu_affinity = false;
  cpu_set_t cpu_affinity{}; ///< sched_setaffinity(0, sizeof, &cpu_affinity)
  bool has_mem_policy = false;
  int mem_policy_mode = 0;             ///< MPOL_BIND, MPOL_PREFERRED, ...
  unsigned long mem_nodemask[16] = {}; ///< set_mempolicy's nodemask (up to 1024 nodes)
  unsigned long mem_maxnode = 0;       ///< its size in bits, as set_mempolicy takes it
};

/// Added to the errno a child reports when entering `cwd` failed, so that
/// the parent blames the directory and not the program.
inline constexpr int k_failed_chdir = 1 << 16;
/// The same for the placement's calls (--numa-binding): the parent names the
/// call that failed, not exec.
inline constexpr int k_failed_affinity = 1 << 20;
inline constexpr int k_failed_mempolicy = 1 << 21;

/// The child's side: joins the cgroup, sets PR_SET_PDEATHSIG(SIGKILL) (and
/// leaves if air-run is already gone), its own process group, the placement,
/// the working directory, default signal actions and an empty mask, stdin,
/// stdout and stderr, closes every other fd, restores the open-file limit,
/// and execs. A failed step writes its errno to `exec_error_fd` and exits 127.
/// System calls only, through raw_syscall: safe after fork and in a child
/// that shares the parent's memory.
[[noreturn]] void exec_prepared(const SpawnRequest& request);

} // namespace air
