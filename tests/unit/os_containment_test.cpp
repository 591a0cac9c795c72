// What keeps a run's processes inside the run: the /proc and cgroup parsers
// (pure), and the supervisor ending what its ranks leave behind and never
// blocking on a console nobody reads (real processes).
#include "core/os/proc_events.hpp"
#include "core/os/proc_table.hpp"
#include "core/os/run_cgroup.hpp"
#include "core/os/watchdog.hpp"
#include "core/run/supervisor.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/temp_dir.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

using air::test::fixture;
using air::test::TempDir;

namespace {

using Status = air::RunOutcome::Status;

air::LaunchPlan plan_of(std::vector<std::vector<std::string>> argvs) {
  air::LaunchPlan plan;
  plan.world_size = static_cast<int>(argvs.size());
  plan.ranks_per_node = plan.world_size;
  plan.grace_period = air::Millis(1'000);
  for (std::size_t i = 0; i < argvs.size(); ++i) {
    air::RankPlan r;
    r.rank = static_cast<int>(i);
    r.local_rank = static_cast<int>(i);
    r.argv = argvs[i];
    r.env = air::current_environment();
    plan.ranks.push_back(r);
  }
  return plan;
}

bool alive(pid_t pid) {
  air::ProcEntry e;
  return air::read_proc_entry(pid, e) && !e.zombie;
}

pid_t read_pid(const std::string& path) {
  std::ifstream in(path);
  long pid = -1;
  in >> pid;
  return static_cast<pid_t>(pid);
}

} // namespace

TEST_CASE("proc_table: stat lines with odd command names", "[containment]") {
  air::ProcEntry e;
  REQUIRE(air::parse_proc_stat("42 (a) b) c) S 7 42 40 0 -1 4194560 1 0 0 0 3 4 0 0 20 0 1 0 98765 1 2", e));
  CHECK(e.pid == 42);
  CHECK(e.ppid == 7);
  CHECK(e.pgid == 42);
  CHECK(e.sid == 40);
  CHECK(e.start == 98765);
  CHECK(e.cpu_ticks == 7); // utime 3 + stime 4
  CHECK_FALSE(e.zombie);
  REQUIRE(air::parse_proc_stat("9 (x) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0", e));
  CHECK(e.zombie);
  CHECK_FALSE(air::parse_proc_stat("9 x S 1", e));
  CHECK_FALSE(air::parse_proc_stat("", e));
}

TEST_CASE("proc_table: descendants follow parent links, skip a subtree and zombies", "[containment]") {
  std::vector<air::ProcEntry> t = {
      {10, 1, 10, 0, false}, // air-run
      {11, 10, 11, 0, false}, {12, 11, 11, 0, false},
      {13, 12, 13, 0, false},                         // rank, child, setsid grandchild
      {14, 10, 14, 0, false}, {15, 14, 15, 0, false}, // watchdog and a child of it
      {16, 11, 11, 0, true},                          // zombie
      {17, 1, 17, 0, false},                          // a stranger
  };
  std::vector<int> pids;
  for (const auto& e : air::live_descendants(t, {10}, {14})) pids.push_back(e.pid);
  std::sort(pids.begin(), pids.end());
  CHECK(pids == std::vector<int>{11, 12, 13});
}

TEST_CASE("proc_table: members of sessions and groups, whatever their pids", "[containment]") {
  std::vector<air::ProcEntry> t = {
      {20, 1, 20, 0, false, 20}, // a daemon that called setsid
      {21, 1, 20, 0, false, 20}, // its child, now parented by init
      {22, 1, 22, 0, false, 20}, // a child that made a group of its own in that session
      {23, 1, 23, 0, true, 20},  // zombie
      {24, 1, 24, 0, false, 5},  // another session
      {25, 24, 30, 0, false, 5}, // a group named in the list
      {26, 1, 26, 0, false, 26}, // a stranger
  };
  std::vector<int> pids;
  for (const auto& e : air::members_of(t, {20}, {30})) pids.push_back(e.pid);
  CHECK(pids == std::vector<int>{20, 21, 22, 25});
  CHECK(air::members_of(t, {}, {}).empty());
}

TEST_CASE("proc_events: a fork and its exit are told as they happen", "[containment]") {
  const air::UniqueFd events = air::open_proc_events();
  if (!events) {
    WARN("skipped: the kernel's process events are not available here");
    return;
  }
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  bool forked = false;
  bool exited = false;
  air::ProcEventHandlers handlers;
  handlers.process_forked = [&](pid_t parent, pid_t pid) {
    forked = forked || (parent == ::getpid() && pid == child);
  };
  handlers.process_exited = [&](pid_t pid) { exited = exited || pid == child; };
  // Silent where the subscription is refused without an error (not root, a
  // pid namespace): then nothing arrives at all.
  for (int i = 0; i < 100 && !exited; ++i) {
    pollfd p{events.get(), POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) air::read_proc_events(events.get(), handlers);
  }
  if (!forked && !exited) {
    WARN("skipped: the kernel's process events stay silent here");
    return;
  }
  CHECK(forked);
  CHECK(exited);
}

// Its fds 0-4 are the ones it replaces: fd 4 was kept as it was when there
// was no events socket to put there, and a control connection on fd 4 then
// stayed open until the watchdog ended (the other node saw it close seconds late).
TEST_CASE("watchdog: keeps none of air-run's fds, fd 4 included, without an events socket",
          "[containment][watchdog]") {
  const int saved = ::fcntl(4, F_DUPFD_CLOEXEC, 10); // what the test runner has on fd 4 (-1: nothing)
  int ends[2];
  REQUIRE(::pipe2(ends, O_CLOEXEC) == 0);
  const int read_end = ::fcntl(ends[0], F_DUPFD_CLOEXEC, 10);
  ::close(ends[0]);
  REQUIRE(::dup2(ends[1], 4) == 4); // the only write end: fd 4, as a control connection may be
  if (ends[1] != 4) ::close(ends[1]);
  int write_fd = -1;
  const pid_t watchdog = air::fork_watchdog(write_fd, "", std::chrono::milliseconds(100), -1);
  if (saved >= 0) {
    ::dup2(saved, 4);
    ::close(saved);
  } else {
    ::close(4);
  }
  REQUIRE(watchdog > 0);
  // The pipe ends once no process holds its write end: not even the watchdog.
  pollfd p{read_end, POLLIN, 0};
  CHECK(::poll(&p, 1, 5'000) == 1);
  CHECK((p.revents & POLLHUP) != 0);
  const air::WatchdogRecord end{air::k_watch_end, 0, 0};
  CHECK(::write(write_fd, &end, sizeof(end)) == static_cast<ssize_t>(sizeof(end)));
  ::close(write_fd);
  ::close(read_end);
  int status = 0;
  CHECK(::waitpid(watchdog, &status, 0) == watchdog);
}

// A killed air-run left its private run folder (the Python shim, the ranks'
// progress and result files) in $TMPDIR; a normal end leaves it to air-run.
TEST_CASE("watchdog: removes the run's private folder when air-run dies, not when the run ends",
          "[containment][watchdog]") {
  for (const bool dies : {true, false}) {
    const TempDir temp;
    const std::string& dir = temp.path();
    REQUIRE(!dir.empty());
    std::filesystem::create_directory(dir + "/pyshim");
    std::ofstream(dir + "/pyshim/sitecustomize.py") << "# shim\n";
    int write_fd = -1;
    const pid_t watchdog = air::fork_watchdog(write_fd, "", std::chrono::milliseconds(100), -1, dir);
    REQUIRE(watchdog > 0);
    if (!dies) {
      const air::WatchdogRecord end{air::k_watch_end, 0, 0};
      CHECK(::write(write_fd, &end, sizeof(end)) == static_cast<ssize_t>(sizeof(end)));
    }
    ::close(write_fd); // without k_watch_end: what the watchdog sees when air-run dies
    int status = 0;
    CHECK(::waitpid(watchdog, &status, 0) == watchdog);
    CHECK(std::filesystem::exists(dir) == !dies);
  }
}

TEST_CASE("run_cgroup: own cgroup v2 directory from mountinfo and /proc/self/cgroup", "[containment]") {
  const std::string unified = "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
  CHECK(air::cgroup_v2_dir(unified, "0::/user.slice/job.scope\n") == "/sys/fs/cgroup/user.slice/job.scope");
  CHECK(air::cgroup_v2_dir(unified, "0::/\n") == "/sys/fs/cgroup");
  const std::string hybrid = "40 30 0:35 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
                             "41 30 0:36 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
  CHECK(air::cgroup_v2_dir(hybrid, "4:memory:/x\n0::/\n") == "/sys/fs/cgroup/unified");
  // A container's mount shows the hierarchy from its own cgroup down.
  const std::string rooted = "50 40 0:40 /kube/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  CHECK(air::cgroup_v2_dir(rooted, "0::/kube/pod1/app\n") == "/sys/fs/cgroup/app");
  CHECK(air::cgroup_v2_dir(rooted, "0::/elsewhere\n").empty());
  CHECK(air::cgroup_v2_dir(unified, "1:name=systemd:/\n").empty()); // v1 only
  CHECK(air::cgroup_v2_dir("", "0::/\n").empty());
  CHECK(air::parse_cgroup_procs("12\n345\n\n7") == std::vector<pid_t>{12, 345, 7});
  CHECK(air::parse_cgroup_procs("").empty());
}

TEST_CASE("supervise: a successful rank's background jobs end with the run", "[containment][supervisor]") {
  const TempDir temp;
  const std::string& dir = temp.path();
  // One child stays in the rank's group, one leaves it with setsid; both ignore SIGTERM.
  const std::string script = "trap '' TERM; '" + fixture("ignore_term") + "' >/dev/null 2>&1 & echo $! >" +
                             dir + "/a; setsid '" + fixture("ignore_term") + "' >/dev/null 2>&1 & echo $! >" +
                             dir + "/b; sleep 0.2; exit 0";
  const auto plan = plan_of({{"/bin/sh", "-c", script}});
  air::ConsoleOptions console;
  console.stdout_fd = -1;
  console.stderr_fd = -1;
  const auto o = air::supervise(plan, console);
  CHECK(o.status == Status::succeeded);
  CHECK(o.leftover_processes >= 2);
  const pid_t a = read_pid(dir + "/a");
  const pid_t b = read_pid(dir + "/b");
  REQUIRE(a > 0);
  REQUIRE(b > 0);
  CHECK_FALSE(alive(a));
  CHECK_FALSE(alive(b));
}

TEST_CASE("supervise: a console nobody reads stops neither the timeout nor the run",
          "[containment][supervisor]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0); // fds[0] stays open and is never read
  auto plan = plan_of({{fixture("spew"), "100000"}});
  plan.timeout = air::Millis(1'000);
  air::ConsoleOptions console;
  console.stdout_fd = fds[1];
  console.stderr_fd = fds[1];
  const auto start = std::chrono::steady_clock::now();
  const auto o = air::supervise(plan, console);
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(fds[0]);
  ::close(fds[1]);
  CHECK(o.status == Status::timed_out);
  CHECK(o.exit_code() == 124);
  CHECK(o.console_lines_dropped > 0);
  CHECK(took < std::chrono::seconds(6)); // 1 s timeout, 1 s grace, 1 s console stall, slack
}

TEST_CASE("proc_table: the SigCgt mask says which signals have a handler", "[containment]") {
  // Python with faulthandler on SIGRTMIN+3 (37) and its own SIGINT (2) handler.
  const std::string armed = "Name:\tpython3\nSigIgn:\t0000000001001000\nSigCgt:\t0000001000000002\n";
  CHECK(air::status_catches_signal(armed, 37));
  CHECK(air::status_catches_signal(armed, 2));
  CHECK_FALSE(air::status_catches_signal(armed, 15));
  // After exec (sleep): no handler left, the real-time signal would kill it.
  CHECK_FALSE(air::status_catches_signal("Name:\tsleep\nSigCgt:\t0000000000000000\n", 37));
  CHECK_FALSE(air::status_catches_signal("Name:\tx\n", 37));
  CHECK_FALSE(air::status_catches_signal(armed, 0));
  // A live process: a handler shows once installed, and not once gone.
  const int sig = SIGRTMIN + 5;
  CHECK_FALSE(air::catches_signal(getpid(), sig));
  struct sigaction sa {
  }, old{};
  sa.sa_handler = [](int) {};
  REQUIRE(::sigaction(sig, &sa, &old) == 0);
  CHECK(air::catches_signal(getpid(), sig));
  ::sigaction(sig, &old, nullptr);
  CHECK_FALSE(air::catches_signal(getpid(), sig));
}
