#include "core/os/process.hpp"

#include "core/os/pipe_capacity.hpp"
#include "core/os/shared_spawn.hpp"
#include "core/os/spawn_request.hpp"

#include <fcntl.h>
#include <linux/mempolicy.h>
#include <pthread.h>
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

/// The RLIMIT_NOFILE air-run inherited, once raise_open_file_limit changed it.
std::optional<rlimit> g_inherited_open_files;

Error exec_error(const std::string& name, bool searched, int err) {
  if (err & (k_failed_affinity | k_failed_mempolicy)) {
    const char* call = (err & k_failed_affinity) ? "sched_setaffinity" : "set_mempolicy";
    return {ErrorKind::system, name + ": --numa-binding: " + call + ": " +
                                   std::strerror(err & ~(k_failed_affinity | k_failed_mempolicy))};
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
  auto read_end = make_pipe(write_end);
  if (read_end) set_pipe_size(read_end->get(), options.output_pipe_size);
  return read_end;
}

Expected<UniqueFd> make_pipe(UniqueFd& write_end) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe2", errno);
  write_end.reset(fds[1]);
  return UniqueFd(fds[0]);
}

/// O_NONBLOCK on an fd made here a moment ago (a pipe's end, a pty's
/// master). Its status flags are known, none of those F_SETFL changes (only
/// the access mode, which F_SETFL ignores), so no F_GETFL first.
void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, O_NONBLOCK); }

/// air-run's pid, asked of the kernel once, not once per rank; a child
/// forked from air-run asks again (the atfork handler forgets it).
pid_t own_pid() {
  static pid_t pid = 0;
  [[maybe_unused]] static const int hooked = ::pthread_atfork(nullptr, nullptr, [] { pid = 0; });
  if (pid == 0) pid = ::getpid();
  return pid;
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

/// What a child reads until its exec: the request and everything it points
/// to. Owned by the child's PendingExec, so nothing of it moves or goes away
/// while a child that shares air-run's memory may still read it.
struct SpawnMemory {
  std::string path;
  std::string cwd;
  std::vector<char> strings; ///< argv's and envp's strings, back to back, NUL-terminated
  std::vector<char*> argv;
  std::vector<char*> envp;
  SpawnRequest request;
  ChildStack stack;
};

namespace {

/// Calls f(name, value) for every variable of `env`, in name order.
template <class F> void for_each_variable(const Environment& env, F&& f) {
  for (const auto& [name, value] : env) f(name, value);
}
template <class F> void for_each_variable(const RankEnvironment& env, F&& f) { env.for_each(f); }

const std::string* path_variable(const Environment& env) {
  const auto it = env.find("PATH");
  return it != env.end() ? &it->second : nullptr;
}
const std::string* path_variable(const RankEnvironment& env) { return env.get("PATH"); }

/// argv and envp as execve takes them, in one buffer of strings (one
/// allocation, not one per variable) and two pointer arrays.
template <class Env> void lay_out(SpawnMemory& m, const std::vector<std::string>& argv, const Env& env) {
  std::size_t bytes = 0;
  std::size_t variables = 0;
  for (const auto& a : argv) bytes += a.size() + 1;
  for_each_variable(env, [&](const std::string& name, const std::string& value) {
    bytes += name.size() + value.size() + 2;
    ++variables;
  });
  m.strings.resize(bytes);
  char* at = m.strings.data();
  auto put = [&at](std::string_view text) {
    std::memcpy(at, text.data(), text.size());
    at += text.size();
  };
  m.argv.reserve(argv.size() + 1);
  for (const auto& a : argv) {
    m.argv.push_back(at);
    put(a);
    *at++ = '\0';
  }
  m.argv.push_back(nullptr);
  m.envp.reserve(variables + 1);
  for_each_variable(env, [&](const std::string& name, const std::string& value) {
    m.envp.push_back(at);
    put(name);
    *at++ = '=';
    put(value);
    *at++ = '\0';
  });
  m.envp.push_back(nullptr);
}

/// Signals air-run itself handles or ignores, which the rank gets back at
/// their defaults (any other ignored one stays ignored, as after `nohup`).
std::uint64_t own_signals() {
  std::uint64_t mask = 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGUSR1, SIGUSR2, SIGQUIT})
    mask |= std::uint64_t{1} << (sig - 1);
  return mask;
}

} // namespace

std::uint64_t handled_signals() {
  std::uint64_t mask = 0;
  for (int sig = 1; sig <= 64; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
#if defined(__x86_64__)
    // The kernel's table, glibc's own signals (32 and 33, which sigaction()
    // refuses to show) included. Its struct sigaction: the handler first.
    struct {
      unsigned long handler, flags, restorer, mask;
    } current{};
    if (::syscall(SYS_rt_sigaction, sig, nullptr, &current, sizeof(current.mask)) != 0) continue;
    const bool handler = current.handler != 0 && current.handler != 1; // SIG_DFL, SIG_IGN
#else
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) != 0) continue;
    const bool handler = current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN;
#endif
    if (handler) mask |= std::uint64_t{1} << (sig - 1);
  }
  return mask;
}

PendingExec::PendingExec() = default;
PendingExec::PendingExec(pid_t pid, UniqueFd status, std::unique_ptr<SpawnMemory> memory)
    : pid_(pid), status_(std::move(status)), memory_(std::move(memory)) {}
PendingExec::PendingExec(pid_t pid, UniqueFd status) : pid_(pid), status_(std::move(status)) {}
PendingExec::PendingExec(PendingExec&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), status_(std::move(other.status_)),
      memory_(std::move(other.memory_)) {}
PendingExec& PendingExec::operator=(PendingExec&& other) noexcept {
  if (this != &other) {
    wait();
    pid_ = std::exchange(other.pid_, -1);
    status_ = std::move(other.status_);
    memory_ = std::move(other.memory_);
  }
  return *this;
}
PendingExec::~PendingExec() { wait(); }

int PendingExec::wait() {
  if (!status_) return 0;
  // EOF means exec succeeded (the close-on-exec write end vanished with it).
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(status_.get(), &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  status_.reset();
  if (n > 0) {
    // Reaped before the memory goes: until it is gone the failed child may
    // still be on its way out on the stack it shares with us.
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    memory_.reset();
    return n == sizeof(child_errno) ? child_errno : EIO;
  }
  memory_.reset();
  return 0;
}

Expected<ChildStreams> open_child_streams(const SpawnOptions& options) {
  // Every fd is close-on-exec from birth (pipe2/open flags, not a later
  // fcntl), so no other rank, spawned concurrently or later, inherits it.
  ChildStreams s;
  if (options.stdin_pipe) {
    auto r = make_pipe(s.parent.stdin_fd);
    if (!r) return r.error();
    s.stdin_end = std::move(*r);
    // Nonblocking: a rank that does not read must never stall air-run's loop.
    set_nonblocking(s.parent.stdin_fd.get());
  } else if (options.stdin_from < 0) {
    s.stdin_end.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!s.stdin_end) return sys_error("open /dev/null", errno);
  }
  auto out_read = make_output(s.stdout_end, options.stdout_tty, options, s.parent.stdout_tty);
  if (!out_read) return out_read.error();
  auto err_read = make_output(s.stderr_end, options.stderr_tty, options, s.parent.stderr_tty);
  if (!err_read) return err_read.error();
  s.parent.stdout_fd = std::move(*out_read);
  s.parent.stderr_fd = std::move(*err_read);
  for (int fd : {s.parent.stdout_fd.get(), s.parent.stderr_fd.get()}) set_nonblocking(fd);
  return s;
}

namespace {

/// start_process and start_rank_process: the same steps for either kind of environment.
template <class Env>
Expected<StartedProcess> start_with(const std::vector<std::string>& argv, const Env& env, CgroupTarget cgroup,
                                    const SpawnOptions& options) {
  if (argv.empty() || argv[0].empty()) return usage_error("empty command");
  const bool searched = argv[0].find('/') == std::string::npos;
  const std::string* path = path_variable(env);
  auto resolved = resolve_executable(argv[0], path != nullptr ? *path : std::string(k_default_path));
  if (!resolved) return resolved.error();

  // Everything the child reads, built here because the child must not allocate.
  auto memory = std::make_unique<SpawnMemory>();
  memory->path = std::move(*resolved);
  memory->cwd = options.working_dir;
  lay_out(*memory, argv, env);

  auto streams = open_child_streams(options);
  if (!streams) return streams.error();
  UniqueFd exec_write;
  auto exec_read = make_pipe(exec_write);
  if (!exec_read) return exec_read.error();

  SpawnRequest& request = memory->request;
  request.path = memory->path.c_str();
  request.argv = memory->argv.data();
  request.envp = memory->envp.data();
  request.cwd = memory->cwd.empty() ? nullptr : memory->cwd.c_str();
  request.stdin_fd = options.stdin_from >= 0 ? options.stdin_from : streams->stdin_end.get();
  request.stdout_fd = streams->stdout_end.get();
  request.stderr_fd = streams->stderr_end.get();
  request.exec_error_fd = exec_write.get();
  request.parent = own_pid();
  if (g_inherited_open_files) {
    request.restore_open_files = true;
    request.open_files = *g_inherited_open_files;
  }
  // --numa-binding, prepared by the caller (SpawnOptions::bind_cpus,
  // bind_memory). Memory is preferred, not bound: a full node spills to the
  // others instead of failing the rank's allocations (maxnode counts one bit
  // more, as libnuma passes it).
  if (options.bind_cpus) {
    request.has_cpu_affinity = true;
    request.cpu_affinity = options.cpus;
  }
  if (options.bind_memory) {
    request.has_mem_policy = true;
    request.mem_policy_mode = MPOL_PREFERRED;
    static_assert(sizeof(request.mem_nodemask) == sizeof(options.memory_nodes));
    std::memcpy(request.mem_nodemask, options.memory_nodes, sizeof(request.mem_nodemask));
    request.mem_maxnode = sizeof(request.mem_nodemask) * 8 + 1;
  }
  // Not value_or(handled_signals()): its argument, 62 system calls, would be
  // worked out for every rank even where the batch's table is given.
  request.reset_signals =
      own_signals() | (options.handled_signals ? *options.handled_signals : handled_signals());
  const long pid = start_child(request, spawn_method(), cgroup, memory->stack);
  if (pid < 0) return sys_error("clone", static_cast<int>(-pid));

  // Same call as the child: whichever runs first wins, so the group exists
  // before anyone signals it. EACCES (child already exec'd) is fine.
  ::setpgid(static_cast<pid_t>(pid), static_cast<pid_t>(pid));
  // Drop our copies of the child's ends now, or the pipes never reach EOF.
  // (The child has its own fd table even when it shares our memory.)
  streams->stdin_end.reset();
  streams->stdout_end.reset();
  streams->stderr_end.reset();
  exec_write.reset();
  StartedProcess started;
  started.child = std::move(streams->parent);
  started.child.pid = static_cast<pid_t>(pid);
  started.exec = PendingExec(static_cast<pid_t>(pid), std::move(*exec_read), std::move(memory));
  started.name = argv[0];
  started.searched = searched;
  started.working_dir = options.working_dir;
  return started;
}

} // namespace

Expected<StartedProcess> start_process(const std::vector<std::string>& argv, const Environment& env,
                                       CgroupTarget cgroup, const SpawnOptions& options) {
  return start_with(argv, env, cgroup, options);
}

Expected<StartedProcess> start_rank_process(const std::vector<std::string>& argv, const RankEnvironment& env,
                                            CgroupTarget cgroup, const SpawnOptions& options) {
  return start_with(argv, env, cgroup, options);
}

Expected<ChildProcess> confirm_exec(StartedProcess started) {
  const int err = started.exec.wait();
  if (err == 0) return std::move(started.child);
  if ((err & k_failed_chdir) != 0 && (err & (k_failed_affinity | k_failed_mempolicy)) == 0) {
    const int cause = err & ~k_failed_chdir;
    return Error{cause == ENOENT || cause == ENOTDIR ? ErrorKind::not_found : ErrorKind::not_executable,
                 started.name + ": cannot enter the working directory " + started.working_dir + ": " +
                     std::strerror(cause)};
  }
  return exec_error(started.name, started.searched, err);
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
