#include "core/os/process.hpp"
#include "core/os/shared_spawn.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/temp_dir.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using air::test::fixture;
using air::test::TempDir;

namespace {

/// Reads both pipes to EOF and reaps the child; returns stdout, stderr, status.
struct Finished {
  std::string out;
  std::string err;
  int wstatus = 0;
};

Finished finish(air::ChildProcess& child) {
  Finished f;
  std::string* bufs[2] = {&f.out, &f.err};
  int fds[2] = {child.stdout_fd.get(), child.stderr_fd.get()};
  int open = 2;
  while (open > 0) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (::poll(p, 2, 10'000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || p[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i], buf, sizeof(buf));
      if (n > 0) {
        bufs[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EAGAIN) {
        fds[i] = -1;
        --open;
      }
    }
  }
  while (::waitpid(child.pid, &f.wstatus, 0) < 0 && errno == EINTR) {
  }
  return f;
}

} // namespace

TEST_CASE("resolve_executable searches the given PATH", "[process]") {
  auto sh = air::resolve_executable("sh", "/nonexistent:/bin");
  REQUIRE(sh.ok());
  CHECK(*sh == "/bin/sh");
  auto missing = air::resolve_executable("air-no-such-program", "/bin:/usr/bin");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().kind == air::ErrorKind::not_found);
  CHECK(missing.error().message == "air-no-such-program: command not found");
  auto with_slash = air::resolve_executable("./x/y", "/bin");
  REQUIRE(with_slash.ok());
  CHECK(*with_slash == "./x/y");
}

TEST_CASE("resolve_executable reports a match without execute permission", "[process]") {
  TempDir dir;
  const std::string file = dir.path() + "/script";
  std::ofstream(file) << "#!/bin/sh\n";
  ::chmod(file.c_str(), 0644);
  // Even root fails access(X_OK) when no execute bit is set at all.
  auto r = air::resolve_executable("script", dir.path());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == air::ErrorKind::not_executable);
  CHECK(r.error().message == "script: permission denied");
}

TEST_CASE("spawn_process passes exactly the given environment", "[process]") {
  auto child = air::spawn_process({fixture("print_env")}, {{"FOO", "bar baz"}, {"PATH", "/usr/bin:/bin"}});
  REQUIRE(child.ok());
  CHECK(child->pid > 0);
  const Finished f = finish(*child);
  CHECK(f.out == "FOO=bar baz\nPATH=/usr/bin:/bin\n");
  CHECK(WIFEXITED(f.wstatus));
  CHECK(WEXITSTATUS(f.wstatus) == 0);
}

TEST_CASE("spawn_process: own group, stdin /dev/null, only fds 0-2", "[process]") {
  auto child = air::spawn_process({fixture("list_fds"), "-l"}, {});
  REQUIRE(child.ok());
  CHECK(::getpgid(child->pid) == child->pid);
  const Finished f = finish(*child);
  // stdout and stderr are pipes; the names carry inode numbers, so check the prefix.
  const auto first_newline = f.out.find('\n');
  REQUIRE(first_newline != std::string::npos);
  CHECK(f.out.substr(0, first_newline) == "0 /dev/null");
  CHECK(f.out.find("\n1 pipe:[") != std::string::npos);
  CHECK(f.out.find("\n2 pipe:[") != std::string::npos);
  CHECK(std::count(f.out.begin(), f.out.end(), '\n') == 3);
}

TEST_CASE("spawn_process: exec failures are errors, not exit codes", "[process]") {
  TempDir dir;
  SECTION("not found on PATH, before any fork") {
    auto r = air::spawn_process({"air-no-such-program"}, {{"PATH", "/bin"}});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == air::ErrorKind::not_found);
    CHECK(r.error().message == "air-no-such-program: command not found");
  }
  SECTION("a missing path, reported by exec in the child") {
    auto r = air::spawn_process({dir.path() + "/missing"}, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == air::ErrorKind::not_found);
    CHECK(r.error().message == dir.path() + "/missing: No such file or directory");
  }
  SECTION("a file that is not executable") {
    const std::string file = dir.path() + "/plain";
    std::ofstream(file) << "data\n";
    ::chmod(file.c_str(), 0644);
    auto r = air::spawn_process({file}, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == air::ErrorKind::not_executable);
    CHECK(r.error().message == file + ": permission denied");
  }
  SECTION("an executable file in no known format") {
    const std::string file = dir.path() + "/garbage";
    std::ofstream(file) << "\x01\x02\x03\x04garbage";
    ::chmod(file.c_str(), 0755);
    auto r = air::spawn_process({file}, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == air::ErrorKind::not_executable);
    CHECK(r.error().message == file + ": cannot execute: Exec format error");
  }
  SECTION("an empty command") {
    auto r = air::spawn_process({}, {});
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == air::ErrorKind::usage);
    CHECK(r.error().message == "empty command");
  }
}

namespace {
void count_signal(int) {}

/// The mask of one "SigXxx:" line of /proc/<pid>/status text (bit N-1 is signal N).
std::uint64_t status_mask(const std::string& status, const std::string& field) {
  const auto at = status.find(field + ":\t");
  if (at == std::string::npos) return ~0ULL;
  return std::stoull(status.substr(at + field.size() + 2, 16), nullptr, 16);
}

constexpr std::uint64_t bit(int sig) { return 1ULL << (sig - 1); }

/// Sets `sig`'s action to `handler` (a function, SIG_IGN or SIG_DFL) for
/// the life of the object; the one before comes back at its end.
class ScopedAction {
public:
  ScopedAction(int sig, void (*handler)(int)) : sig_(sig) {
    struct sigaction act {};
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    ::sigaction(sig, &act, &old_);
  }
  ScopedAction(int sig, void (*info)(int, siginfo_t*, void*)) : sig_(sig) {
    struct sigaction act {};
    act.sa_flags = SA_SIGINFO;
    act.sa_sigaction = info;
    sigemptyset(&act.sa_mask);
    ::sigaction(sig, &act, &old_);
  }
  ~ScopedAction() { ::sigaction(sig_, &old_, nullptr); }
  ScopedAction(const ScopedAction&) = delete;
  ScopedAction& operator=(const ScopedAction&) = delete;

private:
  int sig_;
  struct sigaction old_ {};
};
} // namespace

TEST_CASE("spawn_process: the rank starts with default signal actions and nothing blocked", "[process]") {
  // The launcher handles SIGWINCH and SIGUSR1 with a function, ignores SIGPIPE
  // and SIGXFSZ, and blocks everything while it spawns: of that, only an
  // ignored signal that is not air-run's own (SIGXFSZ) reaches the rank. A handler left in place would also
  // run in the child while it still shares the launcher's memory.
  bool launcher_kept_its_handler = false;
  auto child = [&] {
    const ScopedAction winch(SIGWINCH, count_signal);
    const ScopedAction usr1(SIGUSR1, count_signal);
    const ScopedAction broken_pipe(SIGPIPE, SIG_IGN);
    const ScopedAction xfsz(SIGXFSZ, SIG_IGN);
    sigset_t all, old_mask;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, &old_mask);
    auto started = air::spawn_process({"/bin/cat", "/proc/self/status"}, {});
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    struct sigaction current {};
    ::sigaction(SIGWINCH, nullptr, &current);
    launcher_kept_its_handler = current.sa_handler == count_signal;
    return started;
  }();

  REQUIRE(child.ok());
  const Finished f = finish(*child);
  CHECK(WIFEXITED(f.wstatus));
  CHECK(status_mask(f.out, "SigBlk") == 0);
  CHECK(status_mask(f.out, "SigCgt") == 0);
  // SIGXFSZ stays ignored as the launcher found it; SIGPIPE is air-run's own
  // and is reset. (Other bits may be the test binary's own: the sanitizers ignore some.)
  const std::uint64_t ignored = status_mask(f.out, "SigIgn");
  CHECK((ignored & bit(SIGXFSZ)) != 0);
  CHECK((ignored & (bit(SIGPIPE) | bit(SIGWINCH) | bit(SIGUSR1))) == 0);
  // The child's resets are its own: the launcher's handlers are untouched.
  CHECK(launcher_kept_its_handler);
}

TEST_CASE("handled_signals: the signals with a handler, not the ignored or default ones", "[process]") {
  // What a batch of ranks is started with (core/run/rank_spawn.cpp): each
  // child sets these back before it unblocks signals, and asks nothing itself.
  std::uint64_t found = 0;
  {
    const ScopedAction winch(SIGWINCH, count_signal);
    const ScopedAction urg(SIGURG, [](int, siginfo_t*, void*) {});
    const ScopedAction xfsz(SIGXFSZ, SIG_IGN);
    const ScopedAction ttin(SIGTTIN, SIG_DFL);
    found = air::handled_signals();
  }
  CHECK((found & bit(SIGWINCH)) != 0);
  CHECK((found & bit(SIGURG)) != 0);
  CHECK((found & bit(SIGXFSZ)) == 0);
  CHECK((found & bit(SIGTTIN)) == 0);
  CHECK((found & (bit(SIGKILL) | bit(SIGSTOP))) == 0);
}

TEST_CASE("start_process: a pseudo-terminal for stdout, bytes unchanged, sized, close-on-exec", "[process]") {
  air::SpawnOptions options;
  options.stdout_tty = true;
  options.tty_columns = 77;
  options.tty_rows = 11;
  auto started = air::start_process(
      {"/bin/sh", "-c",
       "[ -t 1 ] && echo out-tty; [ -t 2 ] || echo err-pipe >&2; stty size <&1; printf 'a\\r b\\n'"},
      {{"PATH", "/bin:/usr/bin"}}, {}, options);
  REQUIRE(started.ok());
  auto child = air::confirm_exec(std::move(*started));
  REQUIRE(child.ok());
  CHECK(child->stdout_tty);
  CHECK_FALSE(child->stderr_tty);
  CHECK((::fcntl(child->stdout_fd.get(), F_GETFD) & FD_CLOEXEC) != 0);
  const Finished f = finish(*child);
  CHECK(f.out == "out-tty\n11 77\na\r b\n"); // no "\r\n": the terminal adds nothing
  CHECK(f.err == "err-pipe\n");
  CHECK(WIFEXITED(f.wstatus));
}

TEST_CASE("spawn_method: the shared-memory spawn unless a sanitizer build or AIR_RUN_SPAWN=fork",
          "[process]") {
  const char* asked = std::getenv("AIR_RUN_SPAWN");
  const bool fork_asked = asked != nullptr && std::strcmp(asked, "fork") == 0;
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  CHECK(air::spawn_method() == (fork_asked ? air::SpawnMethod::fork : air::SpawnMethod::shared));
#else
  CHECK(air::spawn_method() == air::SpawnMethod::fork);
  (void)fork_asked;
#endif
}

TEST_CASE("start_process: exactly the given argv, environment and working directory", "[process]") {
  TempDir dir;
  char real[PATH_MAX];
  REQUIRE(::realpath(dir.path().c_str(), real) != nullptr);
  air::SpawnOptions options;
  options.working_dir = dir.path();
  auto started = air::start_process({"sh", "-c",
                                     "pwd -P; printf '[%s]' \"$0\" \"$@\"; printf '\\n%s|%s|%s\\n' \"$X\" "
                                     "\"${EMPTY-unset}\" \"${HOME-unset}\"",
                                     "zero", "one", "two words", ""},
                                    {{"PATH", "/bin:/usr/bin"}, {"EMPTY", ""}, {"X", "a=b c"}}, {}, options);
  REQUIRE(started.ok());
  auto child = air::confirm_exec(std::move(*started));
  REQUIRE(child.ok());
  const Finished f = finish(*child);
  CHECK(f.out == std::string(real) + "\n[zero][one][two words][]\na=b c||unset\n");
  CHECK(f.err.empty());
  CHECK(WIFEXITED(f.wstatus));
  CHECK(WEXITSTATUS(f.wstatus) == 0);
}

TEST_CASE("start_process: a working directory that cannot be entered is the error", "[process]") {
  TempDir dir;
  air::SpawnOptions options;
  options.working_dir = dir.path() + "/nowhere";
  auto started = air::start_process({"/bin/true"}, {}, {}, options);
  REQUIRE(started.ok());
  auto r = air::confirm_exec(std::move(*started));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == air::ErrorKind::not_found);
  CHECK(r.error().message == "/bin/true: cannot enter the working directory " + dir.path() +
                                 "/nowhere: No such file or directory");
}

TEST_CASE("start_process: children started together each see only fds 0-2", "[process]") {
  // All in flight at once, as spawn_all starts ranks: no child may inherit
  // another's pipes, nor the error pipe of its own start.
  std::vector<air::StartedProcess> started;
  for (int i = 0; i < 16; ++i) {
    auto s = air::start_process({fixture("list_fds")}, {});
    REQUIRE(s.ok());
    started.push_back(std::move(*s));
  }
  for (auto& s : started) {
    auto child = air::confirm_exec(std::move(s));
    REQUIRE(child.ok());
    const Finished f = finish(*child);
    CHECK(f.out == "0\n1\n2\n");
    CHECK(WIFEXITED(f.wstatus));
  }
}

TEST_CASE("spawn_process: the child is killed when the process that started it dies", "[process]") {
  int report[2];
  REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
  const pid_t starter = ::fork();
  REQUIRE(starter >= 0);
  if (starter == 0) {
    auto child = air::spawn_process({"/bin/sleep", "30"}, {});
    const pid_t pid = child.ok() ? child->pid : -1;
    [[maybe_unused]] const ssize_t n = ::write(report[1], &pid, sizeof(pid));
    ::_exit(0); // without a word to the child: PR_SET_PDEATHSIG must end it
  }
  ::close(report[1]);
  pid_t rank = -1;
  const ssize_t n = ::read(report[0], &rank, sizeof(rank));
  ::close(report[0]);
  int status = 0;
  ::waitpid(starter, &status, 0);
  REQUIRE(n == static_cast<ssize_t>(sizeof(rank)));
  REQUIRE(rank > 0);
  // Re-parented and SIGKILLed: gone, or a zombie of whoever adopted it.
  bool dead = false;
  for (int i = 0; i < 500 && !dead; ++i) {
    std::ifstream stat("/proc/" + std::to_string(rank) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) {
      dead = true;
    } else {
      const auto close = line.rfind(')');
      dead = close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
    }
    if (!dead) ::usleep(10'000);
  }
  if (!dead) ::kill(rank, SIGKILL);
  CHECK(dead);
}

TEST_CASE("ChildStack: a stack given back is the next one handed out", "[process]") {
  void* first = nullptr;
  {
    air::ChildStack stack;
    REQUIRE(stack.allocate());
    first = stack.low();
    CHECK(stack.usable() >= 16 * 1024);
    // Writable from the bottom of its usable part up to the top.
    static_cast<volatile char*>(first)[0] = 1;
    static_cast<volatile char*>(first)[stack.usable() - 1] = 1;
  }
  air::ChildStack again;
  REQUIRE(again.allocate());
  CHECK(again.low() == first);
  air::ChildStack other;
  REQUIRE(other.allocate());
  CHECK(other.low() != first);
}

TEST_CASE("start_process in a SpawnWave: the children start clean, the caller's mask is back after",
          "[process]") {
  sigset_t before;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &before);
  std::vector<air::StartedProcess> started;
  {
    const air::SpawnWave wave;
    sigset_t during;
    ::pthread_sigmask(SIG_SETMASK, nullptr, &during);
    CHECK(sigismember(&during, SIGTERM) == 1);
    for (int i = 0; i < 4; ++i) {
      auto s = air::start_process({"/bin/cat", "/proc/self/status"}, {});
      REQUIRE(s.ok());
      started.push_back(std::move(*s));
    }
  }
  sigset_t after;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &after);
  for (int sig = 1; sig < NSIG; ++sig) CHECK(sigismember(&after, sig) == sigismember(&before, sig));
  for (auto& s : started) {
    auto child = air::confirm_exec(std::move(s));
    REQUIRE(child.ok());
    const Finished f = finish(*child);
    CHECK(WIFEXITED(f.wstatus));
    CHECK(status_mask(f.out, "SigBlk") == 0);
  }
}
