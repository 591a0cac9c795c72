#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/base/rank_environment.hpp"
#include "core/base/unique_fd.hpp"

#include <sched.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace air {

struct SpawnMemory;

/// One started process: its pid, which is also its process-group id, and the
/// nonblocking close-on-exec read ends of its stdout and stderr pipes. The
/// caller reaps it (wait4) and owns its teardown.
struct ChildProcess {
  pid_t pid = -1;
  UniqueFd stdout_fd;
  UniqueFd stderr_fd;
  /// The nonblocking close-on-exec write end of its stdin pipe, with
  /// SpawnOptions::stdin_pipe; empty otherwise (stdin is /dev/null).
  UniqueFd stdin_fd;
  /// Whether stdout_fd / stderr_fd is the master of a pseudo-terminal
  /// (SpawnOptions::stdout_tty / stderr_tty) rather than a pipe. A master
  /// reads EIO, not 0, once every copy of the terminal is closed.
  bool stdout_tty = false;
  bool stderr_tty = false;
};

/// How start_process sets up one child beyond the usual isolation.
struct SpawnOptions {
  /// Stdin from a fresh pipe that the caller writes (air-run forwards its own
  /// stdin to the rank that --stdin names), instead of /dev/null.
  bool stdin_pipe = false;
  /// Stdout (stderr) to a pseudo-terminal of its own instead of a pipe, so
  /// that isatty() holds in the rank and libraries keep colour and live
  /// progress bars. The terminal passes bytes through unchanged (no output
  /// processing: '\n' stays '\n'), is not the rank's controlling terminal (the
  /// rank stays in its own process group of air-run's session) and gets
  /// `tty_columns` x `tty_rows` when they are not 0. When no pseudo-terminal
  /// can be had (the system's limit), the stream is a pipe as usual.
  bool stdout_tty = false;
  bool stderr_tty = false;
  unsigned short tty_columns = 0;
  unsigned short tty_rows = 0;
  /// Bytes of buffer for a stdout or stderr pipe (core/os/pipe_capacity.hpp);
  /// 0: the kernel's default.
  std::size_t output_pipe_size = 0;
  /// --numa-binding, prepared by the parent (`bind_to`): the child sets
  /// this CPU affinity and prefers this memory node before exec.
  bool bind_cpus = false;
  cpu_set_t cpus{};
  bool bind_memory = false;
  unsigned long memory_nodes[16] = {}; ///< a nodemask for set_mempolicy: 1024 nodes
  /// The child's working directory; empty: air-run's own. A directory that
  /// cannot be entered is an exec error (not_found for ENOENT).
  std::string working_dir;
  /// An fd of the caller's to become the child's stdin (a socket, say);
  /// -1: /dev/null, or the pipe of `stdin_pipe`. The caller keeps its fd.
  int stdin_from = -1;
  /// handled_signals() as the caller found it just before starting a batch
  /// of children, so that the table is read once, not once a child; unset:
  /// start_process reads it itself.
  std::optional<std::uint64_t> handled_signals;
};

/// The signals that have a handler in this process now (bit N-1: signal N),
/// 64 sigaction queries. A child that shares air-run's memory sets each back
/// to its default before it unblocks signals: a handler must never run in it.
std::uint64_t handled_signals();

/// The three streams of a child not yet born: the ends it gets as fds 0, 1
/// and 2 (close-on-exec, so only a dup2 hands them on), and air-run's ends in
/// `parent` (pid unset; read ends and the stdin pipe's write end
/// nonblocking). start_process and the warm start (core/warm/warm_start.hpp)
/// make them the same way. Stdin is /dev/null unless SpawnOptions says otherwise.
struct ChildStreams {
  ChildProcess parent;
  UniqueFd stdin_end;
  UniqueFd stdout_end;
  UniqueFd stderr_end;
};

/// Opens a child's streams as `options` asks (pipes, pseudo-terminals, a
/// stdin pipe). Errors: system, naming the call that failed.
Expected<ChildStreams> open_child_streams(const SpawnOptions& options);

/// Fills `options` so the child runs on `cpus` (empty: unchanged) with its
/// memory preferred on `memory_node` (-1: unchanged). CPUs and nodes beyond
/// the masks (1024) are left out.
void bind_to(SpawnOptions& options, const std::vector<int>& cpus, int memory_node);

/// Finds `name` along `path_var` (colon-separated; an empty entry is the
/// current directory) the way execvp does, but against the rank's own PATH
/// rather than air-run's, as Python's subprocess does with env=. A name that
/// contains '/' is returned unchanged. Errors: not_found "<name>: command not
/// found", or not_executable "<name>: permission denied" when only files
/// without execute permission match.
Expected<std::string> resolve_executable(const std::string& name, const std::string& path_var);

/// Starts `argv` with exactly `env` as its environment, isolated the way every
/// rank is (a clone of our own rather than posix_spawn, so PDEATHSIG can be
/// set; core/os/shared_spawn.hpp): its own process group, PR_SET_PDEATHSIG(SIGKILL) so `kill -9` of air-run
/// ends the rank itself (its descendants are core/os/containment.hpp's job),
/// default dispositions and an empty mask, stdin from
/// /dev/null, stdout/stderr to two fresh pipes, every other fd closed.
///
/// The child makes only raw system calls between its birth and exec
/// (core/os/spawn_request.hpp); the PATH lookup, the argv/envp arrays and
/// every other input are prepared before it is born. An exec
/// failure travels back through a close-on-exec pipe, so it is an error here,
/// not a mysterious exit 127: not_found (exit 127) for ENOENT/ENOTDIR,
/// not_executable (126) for EACCES, ENOEXEC and other exec errors, system
/// (125) when pipe2/open/clone fail. The failed child is already reaped then.
Expected<ChildProcess> spawn_process(const std::vector<std::string>& argv, const Environment& env);

/// Where a new process is to be born: a cgroup v2 directory, as an fd for
/// clone3 and as its cgroup.procs opened for writing for the fallback. -1: none.
struct CgroupTarget {
  int dir_fd = -1;
  int procs_fd = -1;
};

/// The parent's side of a child that has not exec'd yet: the close-on-exec
/// pipe that reaches EOF at its exec (or carries the errno of a failed step)
/// and the memory the child may still be reading (its request, argv and envp
/// and, when it shares air-run's memory, its stack). That memory is released
/// only once the child has exec'd or been reaped, so destroying a PendingExec
/// that was not waited for waits first.
class PendingExec {
public:
  PendingExec();
  PendingExec(pid_t pid, UniqueFd status, std::unique_ptr<SpawnMemory> memory);
  /// A child that reads none of air-run's memory (the warm start's ranks).
  PendingExec(pid_t pid, UniqueFd status);
  PendingExec(PendingExec&& other) noexcept;
  PendingExec& operator=(PendingExec&& other) noexcept;
  PendingExec(const PendingExec&) = delete;
  PendingExec& operator=(const PendingExec&) = delete;
  ~PendingExec();

  /// Blocks until the child has exec'd (0) or failed (its errno, EIO for a
  /// garbled report; the child is reaped then). The memory is released
  /// either way. Once only: later calls return 0.
  int wait();

private:
  pid_t pid_ = -1;
  UniqueFd status_;
  std::unique_ptr<SpawnMemory> memory_;
};

/// A started child whose exec is not yet confirmed: start_process's result.
/// Launching many ranks, a caller starts them all and then confirms each, so
/// the children exec in parallel rather than one after another.
struct StartedProcess {
  ChildProcess child;
  PendingExec exec;
  std::string name;        ///< argv[0], for the error message
  bool searched = false;   ///< argv[0] was looked up along PATH
  std::string working_dir; ///< SpawnOptions::working_dir, for the error message
};

/// spawn_process's first half: the PATH lookup (its not_found and
/// not_executable errors come from here), the preparation and the child's
/// birth (spawn_method(): sharing air-run's memory until exec, or a fork).
/// The child runs from here on; a signal sent to its group reaches it even before it has exec'd.
/// With a `cgroup` (core/os/run_cgroup.hpp) the child is born in it: clone3's
/// CLONE_INTO_CGROUP (Linux 5.7), else the child moves itself in through
/// cgroup.procs before anything else (slower: every move waits for the
/// kernel's cgroup lock, some milliseconds each).
Expected<StartedProcess> start_process(const std::vector<std::string>& argv, const Environment& env,
                                       CgroupTarget cgroup = {}, const SpawnOptions& options = {});

/// start_process for a rank: its environment's shared part and its own are
/// laid out for execve as they are, with no merged copy made first.
Expected<StartedProcess> start_rank_process(const std::vector<std::string>& argv, const RankEnvironment& env,
                                            CgroupTarget cgroup, const SpawnOptions& options);

/// spawn_process's second half: waits until the child has exec'd (or failed
/// to, when it is reaped and its exec error returned).
Expected<ChildProcess> confirm_exec(StartedProcess started);

/// Lifts air-run's soft limit on open files towards the hard limit (at most
/// 65536). A rank costs air-run two pipe ends while it runs and three while it
/// starts, so a few hundred ranks pass the common soft limit of 1024.
/// Processes started afterwards get back, before exec, the soft limit that
/// air-run inherited: a program that still uses select() breaks on fds above 1023.
void raise_open_file_limit();

/// The PATH execvp falls back to when the environment has none.
inline constexpr const char* k_default_path = "/bin:/usr/bin";

} // namespace air
