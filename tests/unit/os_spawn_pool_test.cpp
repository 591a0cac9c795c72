// The spawn pool (core/os/spawn_pool.hpp): a wave's tasks on the calling
// thread and spare ones, and the spares' two promises: they never end (a
// rank born of one dies when it ends) and they take no signal.
#include "core/os/process.hpp"
#include "core/os/spawn_pool.hpp"
#include "tests/unit/catch.hpp"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

pid_t thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

/// The state letter of `pid` in /proc, or '?' when it is gone.
char process_state(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return '?';
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

/// The blocked-signal mask of thread `tid` of this process, from /proc.
unsigned long long blocked_signals(pid_t tid) {
  std::ifstream status("/proc/self/task/" + std::to_string(tid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("SigBlk:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 16);
  return 0;
}

/// Sets AIR_RUN_SPAWN_THREADS for one scope.
struct SpawnThreadsVar {
  explicit SpawnThreadsVar(const char* value) { ::setenv("AIR_RUN_SPAWN_THREADS", value, 1); }
  ~SpawnThreadsVar() { ::unsetenv("AIR_RUN_SPAWN_THREADS"); }
};

} // namespace

TEST_CASE("spawn pool: every task runs once, on the caller and the spares", "[spawn_pool]") {
  constexpr std::size_t k_tasks = 200;
  std::vector<std::atomic<int>> runs(k_tasks);
  std::mutex mutex;
  std::set<pid_t> threads;
  for (int wave = 0; wave < 3; ++wave) { // the same spares, parked between waves
    for (auto& r : runs) r = 0;
    air::SpawnPool::get().run(k_tasks, 3, [&](std::size_t i) {
      ++runs[i];
      ::usleep(200); // long enough that the spares wake and take some
      const std::lock_guard<std::mutex> lock(mutex);
      threads.insert(thread_id());
    });
    for (std::size_t i = 0; i < k_tasks; ++i) CHECK(runs[i] == 1);
  }
  CHECK(threads.count(thread_id()) == 1); // the caller took some
  CHECK(threads.size() > 1);
  CHECK(threads.size() <= 4);

  // No spares asked for, or one task: the caller alone.
  std::set<pid_t> alone;
  air::SpawnPool::get().run(10, 0, [&](std::size_t) { alone.insert(thread_id()); });
  air::SpawnPool::get().run(1, 3, [&](std::size_t) { alone.insert(thread_id()); });
  CHECK(alone == std::set<pid_t>{thread_id()});
}

TEST_CASE("spawn pool: a child born on a spare outlives the wave, and the spares take no signal",
          "[spawn_pool]") {
  constexpr std::size_t k_children = 12;
  std::vector<pid_t> pids(k_children, -1);
  std::vector<pid_t> born_on(k_children, -1);
  air::SpawnPool::get().run(k_children, 3, [&](std::size_t i) {
    auto child = air::spawn_process({"/bin/sleep", "30"}, {});
    if (child) pids[i] = child->pid;
    born_on[i] = thread_id();
    ::usleep(2000);
  });
  const std::set<pid_t> spares = [&] {
    std::set<pid_t> s(born_on.begin(), born_on.end());
    s.erase(thread_id());
    return s;
  }();
  REQUIRE_FALSE(spares.empty());
  // A child's PR_SET_PDEATHSIG fires when the thread that made it ends: the
  // spares live on, so every child still runs once the wave is over.
  ::usleep(200'000);
  for (pid_t pid : pids) {
    REQUIRE(pid > 0);
    CHECK(process_state(pid) == 'S');
  }
  // A signal sent to air-run must reach its main thread's handling, never a spare.
  for (pid_t tid : spares) {
    const unsigned long long mask = blocked_signals(tid);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGWINCH}) {
      INFO("thread " << tid << " signal " << sig);
      CHECK((mask >> (sig - 1) & 1ULL) == 1ULL);
    }
  }
  for (pid_t pid : pids) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
}

TEST_CASE("spawn_spares: AIR_RUN_SPAWN_THREADS, else one per few births within the CPUs", "[spawn_pool]") {
  {
    const SpawnThreadsVar var("0");
    CHECK(air::spawn_spares(128) == 0);
  }
  {
    const SpawnThreadsVar var("5");
    CHECK(air::spawn_spares(128) == 5);
    CHECK(air::spawn_spares(3) == 2); // never more than the births after the first
    CHECK(air::spawn_spares(1) == 0);
  }
  const std::size_t by_default = air::spawn_spares(1024);
  CHECK(by_default <= 7);
  CHECK(air::spawn_spares(air::k_births_per_thread) == 0); // too few to wake a thread for
  CHECK(air::spawn_spares(2 * air::k_births_per_thread + 1) == std::min<std::size_t>(2, by_default));
  {
    const SpawnThreadsVar var("many"); // not a count: the default
    CHECK(air::spawn_spares(1024) == by_default);
  }
  {
    const SpawnThreadsVar var("-1");
    CHECK(air::spawn_spares(1024) == by_default);
  }
}
