#include "core/os/process.hpp"

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace air {

namespace {

/// Everything the child needs between fork and exec, prepared by the parent
/// so the child allocates nothing (after fork only async-signal-safe calls
/// are allowed: another thread may have held the malloc lock).
struct ChildSetup {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int exec_error_fd = -1;
  pid_t parent = -1;
  long max_fd = 1024;                 ///< upper bound for the close loop when close_range is missing
  const rlimit* open_files = nullptr; ///< soft limit to restore (raise_open_file_limit), or none
  int cgroup_procs_fd = -1;           ///< cgroup.procs to join, or -1 (none, or born in it already)
  // --numa-binding (SpawnOptions::bind_cpus, bind_memory): the CPU affinity
  // to set and the nodemask to prefer memory on; null: none.
  const cpu_set_t* cpus = nullptr;
  const unsigned long* memory_nodes = nullptr;
  unsigned long memory_node_bits = 0;
};

// Marks on the errno the child reports, for a binding rather than exec failing.
constexpr int k_affinity_failed = 1 << 20;
constexpr int k_mempolicy_failed = 1 << 21;

/// clone3's arguments up to `cgroup` (CLONE_ARGS_SIZE_VER2), spelled out here
/// because glibc 2.36 has no wrapper and older kernel headers lack the field.
struct CloneArgs {
  std::uint64_t flags = 0;
  std::uint64_t pidfd = 0;
  std::uint64_t child_tid = 0;
  std::uint64_t parent_tid = 0;
  std::uint64_t exit_signal = 0;
  std::uint64_t stack = 0;
  std::uint64_t stack_size = 0;
  std::uint64_t tls = 0;
  std::uint64_t set_tid = 0;
  std::uint64_t set_tid_size = 0;
  std::uint64_t cgroup = 0;
};
constexpr std::uint64_t k_clone_into_cgroup = 0x200000000ULL;

/// Cleared once clone3 with CLONE_INTO_CGROUP is refused for good (old kernel, seccomp).
bool g_clone_into_cgroup = true;

/// fork(), or with a cgroup directory, a fork born in that cgroup. `born_in`
/// says which. The child must stay async-signal-safe until exec either way
/// (the raw clone3 runs no atfork handlers).
pid_t fork_into(int cgroup_dir_fd, bool& born_in) {
  born_in = false;
#ifdef SYS_clone3
  if (cgroup_dir_fd >= 0 && g_clone_into_cgroup) {
    CloneArgs args;
    args.flags = k_clone_into_cgroup;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<std::uint64_t>(cgroup_dir_fd);
    const long pid = ::syscall(SYS_clone3, &args, sizeof(args));
    if (pid >= 0) {
      born_in = true;
      return static_cast<pid_t>(pid);
    }
    if (errno == EAGAIN || errno == ENOMEM) return -1;
    g_clone_into_cgroup = false; // ENOSYS, E2BIG, EINVAL, EPERM...: the fallback from now on
  }
#endif
  return ::fork();
}

/// The RLIMIT_NOFILE air-run inherited, once raise_open_file_limit changed it.
std::optional<rlimit> g_inherited_open_files;

[[noreturn]] void report_exec_error(int fd, int err) {
  const char* p = reinterpret_cast<const char*>(&err);
  std::size_t left = sizeof(err);
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  _exit(127);
}

/// Closes [first, last] (inclusive); close_range when the kernel has it
/// (Linux 5.9), else a plain loop up to the fd limit.
void close_fds(unsigned first, unsigned last, long max_fd) {
  if (first > last) return;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, first, last, 0U) == 0) return;
#endif
  const long stop = last < static_cast<unsigned>(max_fd) ? static_cast<long>(last) : max_fd - 1;
  for (long fd = first; fd <= stop; ++fd) ::close(static_cast<int>(fd));
}

/// Runs in the child. Async-signal-safe calls only.
[[noreturn]] void exec_child(const ChildSetup& s) {
  // Move the error pipe above 0-2 first, in case air-run was started with a
  // standard fd closed and pipe2 handed out 0, 1 or 2.
  int err_fd = ::fcntl(s.exec_error_fd, F_DUPFD_CLOEXEC, 3);
  if (err_fd < 0) _exit(127);

  // Join the run's cgroup before anything else, so every process this rank
  // ever starts is born in it. "0" moves the writer. A refusal is not fatal:
  // the parent notices (Containment::rank_started) and falls back.
  if (s.cgroup_procs_fd >= 0) {
    [[maybe_unused]] const ssize_t n = ::write(s.cgroup_procs_fd, "0", 1);
  }

  // Die with air-run, even on `kill -9`. The parent may already be gone
  // before prctl took effect; then nobody would signal us, so leave now.
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) report_exec_error(err_fd, errno);
  if (::getppid() != s.parent) _exit(127);

  // Own process group, so teardown can signal the rank and its descendants
  // (DataLoader workers) as one, and the terminal's Ctrl-C does not reach it
  // directly (air-run forwards it). The parent makes the same call.
  if (::setpgid(0, 0) != 0) report_exec_error(err_fd, errno);

  // --numa-binding: before exec, so the rank's first allocation and every
  // thread it starts already run there. Prepared by the parent: two syscalls.
  if (s.cpus && ::sched_setaffinity(0, sizeof(cpu_set_t), s.cpus) != 0)
    report_exec_error(err_fd, errno | k_affinity_failed);
  // Preferred, not bound: a full node spills to the others instead of
  // failing the rank's allocations (maxnode counts one bit more, as libnuma passes it).
  if (s.memory_nodes &&
      ::syscall(SYS_set_mempolicy, MPOL_PREFERRED, s.memory_nodes, s.memory_node_bits + 1) != 0)
    report_exec_error(err_fd, errno | k_mempolicy_failed);

  // Ignored dispositions and the blocked mask survive exec; air-run blocks
  // its supervised signals and ignores SIGPIPE, the rank must not inherit that.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2, SIGQUIT})
    ::sigaction(sig, &dfl, nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);

  // Lift the sources above 2 before dup2 so no dup2 overwrites a source.
  const int in = ::fcntl(s.stdin_fd, F_DUPFD_CLOEXEC, 3);
  const int out = ::fcntl(s.stdout_fd, F_DUPFD_CLOEXEC, 3);
  const int err = ::fcntl(s.stderr_fd, F_DUPFD_CLOEXEC, 3);
  if (in < 0 || out < 0 || err < 0) report_exec_error(err_fd, errno);
  // dup2 clears FD_CLOEXEC on the target, so 0-2 survive exec.
  if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) report_exec_error(err_fd, errno);

  // Defence in depth: everything is O_CLOEXEC already, but a library may
  // have opened an fd without it. Keep only 0-2 and the error pipe.
  const auto keep = static_cast<unsigned>(err_fd);
  close_fds(3, keep - 1, s.max_fd);
  close_fds(keep + 1, ~0U, s.max_fd);

  // Last, once no new fd is needed: the rank's soft limit may be below the
  // fds this child inherited. Best effort: a higher limit harms no one.
  if (s.open_files) ::setrlimit(RLIMIT_NOFILE, s.open_files);

  ::execve(s.path, s.argv, s.envp);
  report_exec_error(err_fd, errno);
}

Error exec_error(const std::string& name, bool searched, int err) {
  if (err & (k_affinity_failed | k_mempolicy_failed)) {
    const char* call = (err & k_affinity_failed) ? "sched_setaffinity" : "set_mempolicy";
    return {ErrorKind::system, name + ": --numa-binding: " + call + ": " +
                                   std::strerror(err & ~(k_affinity_failed | k_mempolicy_failed))};
  }
  switch (err) {
  case ENOENT:
  case ENOTDIR:
    return {ErrorKind::not_found, name + (searched ? ": command not found" : ": No such file or directory")};
  case EACCES:
  case EPERM:
    return {ErrorKind::not_executable, name + ": permission denied"};
  default:
    return {ErrorKind::not_executable, name + ": cannot execute: " + std::strerror(err)};
  }
}

Expected<UniqueFd> make_pipe(UniqueFd& write_end);

/// A pseudo-terminal: the master (returned) and its terminal (`terminal`),
/// both close-on-exec from birth, the terminal in raw mode (bytes pass as
/// written) and sized `columns` x `rows` when given.
Expected<UniqueFd> make_pty(UniqueFd& terminal, unsigned short columns, unsigned short rows) {
  UniqueFd master(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master) return sys_error("posix_openpt", errno);
  char name[128];
  if (::grantpt(master.get()) != 0 || ::unlockpt(master.get()) != 0 ||
      ::ptsname_r(master.get(), name, sizeof name) != 0)
    return sys_error("unlockpt", errno);
  terminal.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!terminal) return sys_error(std::string("open ") + name, errno);
  termios mode{};
  if (::tcgetattr(terminal.get(), &mode) == 0) {
    ::cfmakeraw(&mode);
    ::tcsetattr(terminal.get(), TCSANOW, &mode);
  }
  if (columns > 0 && rows > 0) {
    winsize size{};
    size.ws_col = columns;
    size.ws_row = rows;
    ::ioctl(terminal.get(), TIOCSWINSZ, &size);
  }
  return master;
}

/// The read end of a rank's stdout or stderr: a pseudo-terminal's master
/// when asked and one can be had, else a pipe's. `tty` says which.
Expected<UniqueFd> make_output(UniqueFd& write_end, bool want_tty, const SpawnOptions& options, bool& tty) {
  tty = false;
  if (want_tty) {
    auto master = make_pty(write_end, options.tty_columns, options.tty_rows);
    if (master) {
      tty = true;
      return master;
    }
    write_end.reset(); // out of pseudo-terminals (kernel.pty.max): a pipe does
  }
  return make_pipe(write_end);
}

Expected<UniqueFd> make_pipe(UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe2", errno);
  write_end.reset(fds[1]);
  return UniqueFd(fds[0]);
}

} // namespace

Expected<std::string> resolve_executable(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) return name;
  if (name.empty()) return Error{ErrorKind::not_found, "'': command not found"};
  bool saw_non_executable = false;
  std::string_view rest = path_var;
  for (;;) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    std::string candidate = dir.empty() ? name : std::string(dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
      saw_non_executable = true;
    }
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return exec_error(name, true, saw_non_executable ? EACCES : ENOENT);
}

Expected<StartedProcess> start_process(const std::vector<std::string>& argv, const Environment& env,
                                       CgroupTarget cgroup, const SpawnOptions& options) {
  if (argv.empty() || argv[0].empty()) return usage_error("empty command");
  const bool searched = argv[0].find('/') == std::string::npos;
  const auto path_it = env.find("PATH");
  auto resolved = resolve_executable(argv[0], path_it != env.end() ? path_it->second : k_default_path);
  if (!resolved) return resolved.error();

  // argv/envp arrays: built here because the child must not allocate.
  const std::vector<std::string> env_strings = to_envp_strings(env);
  std::vector<char*> c_argv;
  c_argv.reserve(argv.size() + 1);
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  std::vector<char*> c_envp;
  c_envp.reserve(env_strings.size() + 1);
  for (const auto& e : env_strings) c_envp.push_back(const_cast<char*>(e.c_str()));
  c_envp.push_back(nullptr);

  // Every fd is close-on-exec from birth (pipe2/open flags, not a later
  // fcntl), so no other rank, spawned concurrently or later, inherits it.
  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null) return sys_error("open /dev/null", errno);
  UniqueFd out_write, err_write, exec_write, in_write;
  UniqueFd in_read;
  if (options.stdin_pipe) {
    auto r = make_pipe(in_write);
    if (!r) return r.error();
    in_read = std::move(*r);
  }
  bool out_tty = false;
  bool err_tty = false;
  auto out_read = make_output(out_write, options.stdout_tty, options, out_tty);
  if (!out_read) return out_read.error();
  auto err_read = make_output(err_write, options.stderr_tty, options, err_tty);
  if (!err_read) return err_read.error();
  auto exec_read = make_pipe(exec_write);
  if (!exec_read) return exec_read.error();

  ChildSetup setup;
  setup.path = resolved->c_str();
  setup.argv = c_argv.data();
  setup.envp = c_envp.data();
  setup.stdin_fd = in_read ? in_read.get() : dev_null.get();
  setup.stdout_fd = out_write.get();
  setup.stderr_fd = err_write.get();
  setup.exec_error_fd = exec_write.get();
  setup.parent = ::getpid();
  const long open_max = ::sysconf(_SC_OPEN_MAX);
  setup.max_fd = open_max > 0 ? open_max : 1024;
  if (g_inherited_open_files) setup.open_files = &*g_inherited_open_files;
  if (options.bind_cpus) setup.cpus = &options.cpus;
  if (options.bind_memory) {
    setup.memory_nodes = options.memory_nodes;
    setup.memory_node_bits = sizeof(options.memory_nodes) * 8;
  }
  bool born_in_cgroup = false;
  const pid_t pid = fork_into(cgroup.dir_fd, born_in_cgroup);
  if (pid < 0) return sys_error("fork", errno);
  if (pid == 0) {
    if (!born_in_cgroup) setup.cgroup_procs_fd = cgroup.procs_fd;
    exec_child(setup);
  }

  // Same call as the child: whichever runs first wins, so the group exists
  // before anyone signals it. EACCES (child already exec'd) is fine.
  ::setpgid(pid, pid);
  // Drop our copies of the child's ends now, or the pipes never reach EOF.
  out_write.reset();
  err_write.reset();
  exec_write.reset();
  dev_null.reset();
  in_read.reset();
  if (in_write) {
    // Nonblocking: a rank that does not read must never stall air-run's loop.
    const int flags = ::fcntl(in_write.get(), F_GETFL);
    ::fcntl(in_write.get(), F_SETFL, flags | O_NONBLOCK);
  }

  for (int fd : {out_read->get(), err_read->get()}) {
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
  StartedProcess started;
  started.child.pid = pid;
  started.child.stdout_fd = std::move(*out_read);
  started.child.stderr_fd = std::move(*err_read);
  started.child.stdin_fd = std::move(in_write);
  started.child.stdout_tty = out_tty;
  started.child.stderr_tty = err_tty;
  started.exec_status = std::move(*exec_read);
  started.name = argv[0];
  started.searched = searched;
  return started;
}

Expected<ChildProcess> confirm_exec(StartedProcess started) {
  // EOF means exec succeeded (the close-on-exec write end vanished with it).
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(started.exec_status.get(), &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    int status = 0;
    while (::waitpid(started.child.pid, &status, 0) < 0 && errno == EINTR) {
    }
    return exec_error(started.name, started.searched, n == sizeof(child_errno) ? child_errno : EIO);
  }
  return std::move(started.child);
}

void raise_open_file_limit() {
  constexpr rlim_t k_most = 65536; // bounds the child's close loop on kernels without close_range
  rlimit limit{};
  if (g_inherited_open_files || ::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = std::min(limit.rlim_max, k_most);
  if (limit.rlim_cur >= wanted) return;
  const rlimit inherited = limit;
  limit.rlim_cur = wanted;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0) g_inherited_open_files = inherited;
}

void bind_to(SpawnOptions& options, const std::vector<int>& cpus, int memory_node) {
  CPU_ZERO(&options.cpus);
  options.bind_cpus = false;
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) continue;
    CPU_SET(cpu, &options.cpus);
    options.bind_cpus = true;
  }
  constexpr int k_bits = static_cast<int>(sizeof(options.memory_nodes) * 8);
  constexpr int k_word = static_cast<int>(sizeof(unsigned long) * 8);
  std::fill(std::begin(options.memory_nodes), std::end(options.memory_nodes), 0UL);
  options.bind_memory = memory_node >= 0 && memory_node < k_bits;
  if (options.bind_memory)
    options.memory_nodes[memory_node / k_word] |= 1UL << static_cast<unsigned>(memory_node % k_word);
}

Expected<ChildProcess> spawn_process(const std::vector<std::string>& argv, const Environment& env) {
  auto started = start_process(argv, env);
  if (!started) return started.error();
  return confirm_exec(std::move(*started));
}

} // namespace air
