// The supervisor driven for real: fixture processes, real pipes and signals.
// Console output is captured in temp files through ConsoleOptions.
#include "core/os/oom.hpp"
#include "core/run/stop_signals.hpp"
#include "core/run/supervisor.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/temp_dir.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using air::test::fixture;
using air::test::TempDir;

namespace {

using namespace std::chrono_literals;
using Lines = std::vector<std::string>;

air::LaunchPlan make_plan(const std::vector<std::vector<std::string>>& argvs) {
  air::LaunchPlan plan;
  plan.world_size = static_cast<int>(argvs.size());
  plan.ranks_per_node = plan.world_size;
  plan.grace_period = air::Millis(5'000);
  const air::Environment env = air::current_environment();
  for (std::size_t i = 0; i < argvs.size(); ++i) {
    air::RankPlan r;
    r.rank = static_cast<int>(i);
    r.local_rank = static_cast<int>(i);
    r.argv = argvs[i];
    r.env = env;
    plan.ranks.push_back(r);
  }
  return plan;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Lines lines_of(const std::string& text) {
  Lines lines;
  std::string line;
  std::istringstream in(text);
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

struct Captured {
  air::RunOutcome outcome;
  std::string out;
  std::string err;
};

/// Runs the plan with rank stdout/stderr captured in two files of `dir`.
Captured run_plan(const air::LaunchPlan& plan, const TempDir& dir, bool prefix = true) {
  const std::string out_path = dir.file("console.out");
  const std::string err_path = dir.file("console.err");
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  air::ConsoleOptions console;
  console.stdout_fd = out_fd;
  console.stderr_fd = err_fd;
  console.prefix = prefix;
  Captured c;
  c.outcome = air::supervise(plan, console);
  ::close(out_fd);
  ::close(err_fd);
  c.out = read_file(out_path);
  c.err = read_file(err_path);
  return c;
}

/// Whether `pid` is gone (or a zombie waiting for its new parent to reap it).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

pid_t read_pid_file(const std::string& path) {
  return static_cast<pid_t>(std::atoi(read_file(path).c_str()));
}

int count_open_fds() {
  int n = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  while (const dirent* e = ::readdir(dir))
    if (e->d_name[0] != '.') ++n;
  ::closedir(dir);
  return n - 1; // the directory stream's own fd
}

/// No core files from the signal fixtures (the limit is inherited by ranks).
void disable_core_dumps() {
  rlimit none{0, 0};
  ::setrlimit(RLIMIT_CORE, &none);
}

using Status = air::RunOutcome::Status;
using Kind = air::ExitStatus::Kind;

} // namespace

TEST_CASE("supervise: every rank exits 0", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("exit_with"), "0"}, {fixture("exit_with")}, {fixture("exit_with"), "0"}});
  const auto c = run_plan(plan, dir);
  const auto& o = c.outcome;
  CHECK(o.status == Status::succeeded);
  CHECK(o.exit_code() == 0);
  CHECK(o.root_cause_rank == -1);
  CHECK(o.reason.empty());
  REQUIRE(o.ranks.size() == 3);
  std::vector<std::uint64_t> orders;
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(o.ranks[i].rank == static_cast<int>(i));
    CHECK(o.ranks[i].pid > 0);
    CHECK(o.ranks[i].status.success());
    CHECK_FALSE(o.ranks[i].stopped_by_air_run);
    CHECK(o.ranks[i].spawn_error.empty());
    orders.push_back(o.ranks[i].end_order);
  }
  std::sort(orders.begin(), orders.end());
  CHECK(orders == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(o.duration_s < 20);
}

TEST_CASE("supervise: the first failing rank is the root cause, the others are stopped", "[supervisor]") {
  TempDir dir;
  auto plan =
      make_plan({{fixture("sleep_forever")}, {fixture("exit_with"), "3"}, {fixture("sleep_forever")}});
  const auto c = run_plan(plan, dir);
  const auto& o = c.outcome;
  CHECK(o.status == Status::failed);
  CHECK(o.exit_code() == 3);
  CHECK(o.root_cause_rank == 1);
  CHECK(o.reason == "rank 1 exited with exit code 3");
  REQUIRE(o.ranks.size() == 3);
  CHECK(o.ranks[1].end_order == 1);
  CHECK_FALSE(o.ranks[1].stopped_by_air_run);
  for (std::size_t i : {0u, 2u}) {
    CHECK(o.ranks[i].stopped_by_air_run);
    CHECK(o.ranks[i].status.kind == Kind::signaled);
    CHECK(o.ranks[i].status.signal == SIGTERM);
  }
}

namespace {
/// A rank that fails the way gloo's ranks do when a peer process exits.
std::vector<std::string> lost_peer_rank() {
  return {"/bin/sh", "-c",
          "echo 'RuntimeError: [../gloo/transport/tcp/pair.cc:598] Connection closed by peer "
          "[127.0.0.1]:4242' >&2; exit 1"};
}
} // namespace

TEST_CASE("supervise: a rank that only lost its peer is not the root cause of the peer's exit",
          "[supervisor]") {
  // Rank 0 fails first, with a symptom; rank 1, the cause, is still exiting.
  TempDir dir;
  auto plan =
      make_plan({lost_peer_rank(), {"/bin/sh", "-c", "sleep 0.3; exit 7"}, {fixture("sleep_forever")}});
  const auto c = run_plan(plan, dir);
  const auto& o = c.outcome;
  CHECK(o.status == Status::failed);
  CHECK(o.root_cause_rank == 1);
  CHECK(o.exit_code() == 7);
  CHECK(o.reason == "rank 1 exited with exit code 7");
  CHECK(o.ranks[0].status.code == 1);
  CHECK(o.ranks[0].end_order == 1);
  CHECK_FALSE(o.ranks[0].stopped_by_air_run);
  CHECK_FALSE(o.ranks[1].stopped_by_air_run);
  CHECK(o.ranks[2].stopped_by_air_run);
  CHECK(o.ranks[2].status.signal == SIGTERM);
}

TEST_CASE("supervise: a lost peer with no other failure is still the root cause", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("sleep_forever")}, lost_peer_rank()});
  const auto c = run_plan(plan, dir);
  const auto& o = c.outcome;
  CHECK(o.status == Status::failed);
  CHECK(o.root_cause_rank == 1);
  CHECK(o.exit_code() == 1);
  CHECK(o.ranks[0].stopped_by_air_run);
  CHECK(o.ranks[0].status.signal == SIGTERM);
  CHECK(o.duration_s < 10); // the settle time (1 s), then the usual teardown
}

TEST_CASE("supervise: a rank that exits with its own code during the teardown failed, it was not stopped",
          "[supervisor]") {
  // Rank 0 fails first. Ranks 1 and 2 are running when the teardown starts
  // and end with exit code 1 rather than of air-run's SIGTERM: rank 1 on
  // receiving it (a handler), rank 2 after it (it ignores SIGTERM and exits
  // once rank 3, which only the teardown ends, is gone). Both failed on their
  // own; neither may be reported as stopped by air-run. Ranks 3 and 4 show
  // the signal's own ends: died of it, and the shell's 128+15.
  TempDir dir;
  const std::string ready = dir.file("ready");
  const std::string pid3 = dir.file("pid3");
  const std::string handler = "trap 'exit 1' TERM; touch " + ready + "1; sleep 30 & wait";
  const std::string ignorer = "trap '' TERM; while [ ! -s " + pid3 + " ]; do sleep 0.01; done; touch " +
                              ready + "2; while kill -0 $(cat " + pid3 +
                              ") 2>/dev/null; do sleep 0.01; done; exit 1";
  const std::string wrapper = "trap 'exit 143' TERM; touch " + ready + "4; sleep 30 & wait";
  const std::string first =
      "for f in 1 2 4; do while [ ! -e " + ready + "$f ]; do sleep 0.01; done; done; exit 3";
  auto plan = make_plan({{"/bin/sh", "-c", first},
                         {"/bin/sh", "-c", handler},
                         {"/bin/sh", "-c", ignorer},
                         {"/bin/sh", "-c", "echo $$ > " + pid3 + "; exec sleep 30"},
                         {"/bin/sh", "-c", wrapper}});
  const auto c = run_plan(plan, dir);
  const auto& o = c.outcome;
  CHECK(o.status == Status::failed);
  CHECK(o.root_cause_rank == 0);
  CHECK(o.exit_code() == 3);
  REQUIRE(o.ranks.size() == 5);
  CHECK_FALSE(o.ranks[0].stopped_by_air_run);
  for (std::size_t i : {1u, 2u}) {
    CHECK(o.ranks[i].status.kind == Kind::exited);
    CHECK(o.ranks[i].status.code == 1);
    CHECK_FALSE(o.ranks[i].stopped_by_air_run);
    CHECK_FALSE(o.ranks[i].killed);
  }
  CHECK(o.ranks[3].status.signal == SIGTERM);
  CHECK(o.ranks[3].stopped_by_air_run);
  CHECK(o.ranks[4].status.code == 143);
  CHECK(o.ranks[4].stopped_by_air_run);
}

TEST_CASE("supervise: a rank killed by a signal is reported as that signal", "[supervisor]") {
  disable_core_dumps();
  TempDir dir;
  SECTION("SIGSEGV") {
    auto plan = make_plan({{fixture("die_by_signal"), std::to_string(SIGSEGV)}, {fixture("sleep_forever")}});
    const auto c = run_plan(plan, dir);
    CHECK(c.outcome.status == Status::failed);
    CHECK(c.outcome.exit_code() == 128 + SIGSEGV);
    CHECK(c.outcome.root_cause_rank == 0);
    CHECK(c.outcome.reason == "rank 0 was killed by signal 11 (SIGSEGV)");
    CHECK(c.out.find("[rank0]: dying\n") != std::string::npos);
  }
  SECTION("SIGKILL") {
    auto plan = make_plan({{fixture("die_by_signal"), std::to_string(SIGKILL)}});
    const auto c = run_plan(plan, dir);
    CHECK(c.outcome.exit_code() == 137);
    CHECK(c.outcome.reason == "rank 0 was killed by signal 9 (SIGKILL)");
    CHECK_FALSE(c.outcome.ranks[0].oom_killed);
  }
}

TEST_CASE("supervise: timeout tears down with exit 124", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("sleep_forever")}, {fixture("sleep_forever")}});
  plan.timeout = air::Millis(300);
  const auto c = run_plan(plan, dir);
  const auto& o = c.outcome;
  CHECK(o.status == Status::timed_out);
  CHECK(o.exit_code() == 124);
  CHECK(o.reason == "timed out after 300ms");
  CHECK(o.root_cause_rank == -1);
  for (const auto& r : o.ranks) {
    CHECK(r.stopped_by_air_run);
    CHECK(r.status.signal == SIGTERM);
  }
  CHECK(o.duration_s < 5);
}

TEST_CASE("supervise: a rank that ignores SIGTERM is killed after the grace period", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("ignore_term")}});
  plan.timeout = air::Millis(1'000); // ample time to install SIG_IGN, even under ASan
  plan.grace_period = air::Millis(300);
  const auto c = run_plan(plan, dir);
  const auto& o = c.outcome;
  CHECK(o.status == Status::timed_out);
  CHECK(o.reason == "timed out after 1s");
  CHECK(c.out == "[rank0]: ready\n");
  REQUIRE(o.ranks.size() == 1);
  CHECK(o.ranks[0].stopped_by_air_run);
  CHECK(o.ranks[0].status.kind == Kind::signaled);
  CHECK(o.ranks[0].status.signal == SIGKILL);
  CHECK(o.duration_s < 10);
}

TEST_CASE("supervise: descendants of the ranks die at teardown", "[supervisor]") {
  TempDir dir;
  const std::string pid_file = dir.file("grandchild.pid");
  SECTION("a grandchild that obeys SIGTERM") {
    auto plan = make_plan(
        {{fixture("fork_grandchild"), pid_file, "sleep"}, {fixture("wait_for_file"), pid_file, "2"}});
    const auto c = run_plan(plan, dir);
    CHECK(c.outcome.status == Status::failed);
    CHECK(c.outcome.reason == "rank 1 exited with exit code 2");
    const pid_t grandchild = read_pid_file(pid_file);
    REQUIRE(grandchild > 0);
    CHECK(wait_until([&] { return process_gone(grandchild); }, 3s));
  }
  SECTION("a grandchild that ignores SIGTERM gets SIGKILL at the grace deadline") {
    auto plan = make_plan(
        {{fixture("fork_grandchild"), pid_file, "ignore"}, {fixture("wait_for_file"), pid_file, "2"}});
    plan.grace_period = air::Millis(400);
    const auto c = run_plan(plan, dir);
    CHECK(c.outcome.status == Status::failed);
    CHECK(c.outcome.ranks[0].status.signal == SIGTERM); // the leader obeyed
    const pid_t grandchild = read_pid_file(pid_file);
    REQUIRE(grandchild > 0);
    // supervise returned only after the SIGKILL: the grandchild is gone already.
    CHECK(wait_until([&] { return process_gone(grandchild); }, 3s));
    CHECK(c.outcome.duration_s < 10);
  }
}

TEST_CASE("supervise: a grandchild holding the pipes after a clean exit is cut off", "[supervisor]") {
  TempDir dir;
  const std::string pid_file = dir.file("grandchild.pid");
  auto plan = make_plan({{fixture("fork_grandchild"), pid_file, "exit", "0"}});
  const auto c = run_plan(plan, dir);
  CHECK(c.outcome.status == Status::succeeded);
  CHECK(c.out == "[rank0]: ready\n");
  const pid_t grandchild = read_pid_file(pid_file);
  REQUIRE(grandchild > 0);
  CHECK(wait_until([&] { return process_gone(grandchild); }, 3s));
  CHECK(c.outcome.duration_s < 10); // the 2 s drain deadline, not forever
}

TEST_CASE("supervise: an exit is noticed even when another thread takes SIGCHLD", "[supervisor]") {
  // On the H200 machines NVML/CUDA threads started with SIGCHLD unblocked took
  // the signal away from the signalfd, and a finished rank went unnoticed. A
  // thread that takes every SIGCHLD (sigtimedwait) plays that library here;
  // the rank exits while a grandchild keeps its pipes open, so no EOF wakes the loop.
  TempDir dir;
  std::atomic<bool> stop{false};
  std::thread library_thread([&] {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &chld, nullptr);
    const timespec tick{0, 10'000'000};
    while (!stop) sigtimedwait(&chld, nullptr, &tick);
  });
  const std::string pid_file = dir.file("grandchild.pid");
  auto plan = make_plan({{fixture("fork_grandchild"), pid_file, "exit", "0"}});
  const auto start = std::chrono::steady_clock::now();
  const auto c = run_plan(plan, dir);
  stop = true;
  library_thread.join();
  CHECK(c.outcome.status == Status::succeeded);
  CHECK(std::chrono::steady_clock::now() - start < 8s); // 1 s wake-up + 2 s drain, not forever
  const pid_t grandchild = read_pid_file(pid_file);
  REQUIRE(grandchild > 0);
  CHECK(wait_until([&] { return process_gone(grandchild); }, 3s));
}

TEST_CASE("supervise: ranks inherit only fds 0, 1 and 2", "[supervisor]") {
  TempDir dir;
  // Leave a non-CLOEXEC fd open in the supervisor: close_range must still stop it.
  const int leaky = ::open("/dev/null", O_RDONLY);
  auto plan = make_plan({{fixture("list_fds")}, {fixture("list_fds")}});
  const auto c = run_plan(plan, dir);
  ::close(leaky);
  CHECK(c.outcome.status == Status::succeeded);
  Lines rank0, rank1;
  for (const auto& line : lines_of(c.out)) {
    if (line.rfind("[rank0]: ", 0) == 0) rank0.push_back(line.substr(9));
    if (line.rfind("[rank1]: ", 0) == 0) rank1.push_back(line.substr(9));
  }
  CHECK(rank0 == Lines{"0", "1", "2"});
  CHECK(rank1 == Lines{"0", "1", "2"});
}

TEST_CASE("supervise: air-run's own fd count is unchanged after a run", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("exit_with"), "1"}, {fixture("sleep_forever")}});
  const std::string out_path = dir.file("out");
  const int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  const int before = count_open_fds();
  air::ConsoleOptions console;
  console.stdout_fd = out_fd;
  console.stderr_fd = out_fd;
  const auto outcome = air::supervise(plan, console);
  const int after = count_open_fds();
  ::close(out_fd);
  CHECK(outcome.status == Status::failed);
  CHECK(after == before);
}

TEST_CASE("supervise: heavy output on both streams of many ranks", "[supervisor]") {
  TempDir dir;
  constexpr int k_ranks = 4;
  std::vector<std::vector<std::string>> argvs(k_ranks, {fixture("spew"), "8"});
  auto plan = make_plan(argvs);
  const auto c = run_plan(plan, dir);
  CHECK(c.outcome.status == Status::succeeded);
  CHECK(c.outcome.console_lines_dropped == 0);
  // Per rank and stream: consecutive numbers, every line intact. Parsed by
  // hand: a million lines through sscanf would dominate the test's time.
  const auto check_stream = [&](const std::string& text, const std::string& tag) {
    std::vector<long> next(k_ranks, 0);
    std::size_t bad = 0;
    std::size_t lines = 0;
    std::string_view rest(text);
    const std::string head = tag + " ";
    while (!rest.empty()) {
      const auto end = rest.find('\n');
      if (end == std::string_view::npos) {
        ++bad; // unterminated last line
        break;
      }
      std::string_view line = rest.substr(0, end);
      rest.remove_prefix(end + 1);
      ++lines;
      // "[rankR]: <tag> N xxx" with N % 97 + 1 x's
      if (line.substr(0, 5) != "[rank" || line.size() < 9) {
        ++bad;
        continue;
      }
      const int rank = line[5] - '0';
      if (rank < 0 || rank >= k_ranks || line.substr(6, 3) != "]: ") {
        ++bad;
        continue;
      }
      line.remove_prefix(9);
      if (line.substr(0, head.size()) != head) {
        ++bad;
        continue;
      }
      line.remove_prefix(head.size());
      long n = 0;
      std::size_t digits = 0;
      while (digits < line.size() && line[digits] >= '0' && line[digits] <= '9')
        n = n * 10 + (line[digits++] - '0');
      auto& expected = next[static_cast<std::size_t>(rank)];
      const auto pad_size = static_cast<std::size_t>(n % 97 + 1);
      if (digits == 0 || n != expected || line.size() != digits + 1 + pad_size || line[digits] != ' ' ||
          line.find_first_not_of('x', digits + 1) != std::string_view::npos) {
        ++bad;
        continue;
      }
      ++expected;
    }
    CHECK(bad == 0);
    CHECK(lines > 4 * 8 * 1024 * 1024 / 120);
    for (int r = 0; r < k_ranks; ++r) CHECK(next[static_cast<std::size_t>(r)] > 1000);
  };
  check_stream(c.out, "out");
  check_stream(c.err, "err");
}

TEST_CASE("supervise: a partial last line is flushed at EOF", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("partial_line")}});
  const auto c = run_plan(plan, dir);
  CHECK(c.outcome.status == Status::succeeded);
  CHECK(c.out == "[rank0]: no newline at end\n");
  CHECK(c.err == "[rank0]: complete\n");
  const auto& tail = c.outcome.ranks[0].tail;
  CHECK(std::find(tail.begin(), tail.end(), "no newline at end") != tail.end());
  CHECK(std::find(tail.begin(), tail.end(), "complete") != tail.end());
}

TEST_CASE("supervise: over-long lines reach the console in 1 MiB pieces", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("long_line"), std::to_string(5 * 512 * 1024)}});
  const auto c = run_plan(plan, dir);
  CHECK(c.outcome.status == Status::succeeded);
  const Lines lines = lines_of(c.out);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "[rank0]: " + std::string(1 << 20, 'a'));
  CHECK(lines[1] == "[rank0]: " + std::string(1 << 20, 'a'));
  CHECK(lines[2] == "[rank0]: " + std::string(1 << 19, 'a'));
  CHECK(lines[3] == "[rank0]: after");
  // Tail entries are capped, whatever the line length.
  for (const auto& t : c.outcome.ranks[0].tail) CHECK(t.size() <= 4096);
}

TEST_CASE("supervise: the tail keeps the last lines when pieces of a long line come among them",
          "[supervisor]") {
  // The tail skips the lines of a read that cannot be among its last ones,
  // counting newlines: the pieces of an over-long line are lines without one.
  TempDir dir;
  auto plan = make_plan({{fixture("long_line"), std::to_string(5 * 512 * 1024)}});
  plan.tail_lines = 2;
  const auto c = run_plan(plan, dir);
  CHECK(c.outcome.ranks[0].tail == std::deque<std::string>{std::string(4096, 'a'), "after"});
  plan.tail_lines = 3;
  const auto c3 = run_plan(plan, dir);
  CHECK(c3.outcome.ranks[0].tail ==
        std::deque<std::string>{std::string(4096, 'a'), std::string(4096, 'a'), "after"});
}

TEST_CASE("supervise: a target that cannot be started", "[supervisor]") {
  TempDir dir;
  SECTION("not found: 127, nothing else is started") {
    auto plan = make_plan({{"air-no-such-program", "x"}, {fixture("sleep_forever")}});
    const auto c = run_plan(plan, dir);
    const auto& o = c.outcome;
    CHECK(o.status == Status::failed);
    CHECK(o.exit_code() == 127);
    CHECK(o.root_cause_rank == 0);
    CHECK(o.ranks[0].spawn_error == "air-no-such-program: command not found");
    CHECK(o.reason == "rank 0 could not be started: air-no-such-program: command not found");
    CHECK(o.ranks[0].pid == -1);
    CHECK(o.ranks[1].pid == -1);
    CHECK(o.ranks[1].status.kind == Kind::not_exited);
  }
  SECTION("not executable: 126, ranks already running are torn down") {
    const std::string file = dir.file("plain");
    std::ofstream(file) << "data\n";
    ::chmod(file.c_str(), 0644);
    auto plan = make_plan({{fixture("sleep_forever")}, {file}});
    const auto c = run_plan(plan, dir);
    const auto& o = c.outcome;
    CHECK(o.status == Status::failed);
    CHECK(o.exit_code() == 126);
    CHECK(o.root_cause_rank == 1);
    CHECK(o.ranks[1].spawn_error == file + ": permission denied");
    CHECK(o.ranks[1].status.code == 126);
    CHECK(o.ranks[0].stopped_by_air_run);
    CHECK(o.ranks[0].status.signal == SIGTERM);
  }
  SECTION("exec fails after later ranks were started: they are torn down") {
    // Executable but not a program (no #!): only execve itself can tell, by
    // which time every rank has been forked.
    const std::string file = dir.file("not-a-program");
    std::ofstream(file) << std::string("\x7f\x01\x02garbage", 10);
    ::chmod(file.c_str(), 0755);
    auto plan = make_plan({{fixture("sleep_forever")}, {file}, {fixture("sleep_forever")}});
    const auto c = run_plan(plan, dir);
    const auto& o = c.outcome;
    CHECK(o.status == Status::failed);
    CHECK(o.exit_code() == 126);
    CHECK(o.root_cause_rank == 1);
    CHECK(o.ranks[1].spawn_error == file + ": cannot execute: Exec format error");
    CHECK(o.ranks[1].pid == -1);
    for (int i : {0, 2}) {
      CHECK(o.ranks[i].pid > 0);
      CHECK(o.ranks[i].stopped_by_air_run);
      CHECK(o.ranks[i].status.signal == SIGTERM);
    }
  }
}

TEST_CASE("supervise: only console ranks reach the console; all keep a tail", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("list_fds")}, {fixture("list_fds")}});
  plan.ranks[1].console = false;
  plan.tail_lines = 2;
  const auto c = run_plan(plan, dir);
  CHECK(c.out == "[rank0]: 0\n[rank0]: 1\n[rank0]: 2\n");
  CHECK(c.outcome.ranks[1].tail == std::deque<std::string>{"1", "2"});
  CHECK(c.outcome.ranks[0].tail == std::deque<std::string>{"1", "2"});
}

TEST_CASE("supervise: without prefix the lines are passed through", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("partial_line")}});
  const auto c = run_plan(plan, dir, /*prefix=*/false);
  CHECK(c.out == "no newline at end\n");
  CHECK(c.err == "complete\n");
}

TEST_CASE("supervise: per-rank log files get raw lines of both streams", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("partial_line")}, {fixture("list_fds")}});
  plan.ranks[0].log_file = dir.file("logs/nested/rank0.log");
  plan.ranks[1].log_file = dir.file("logs/nested/rank1.log");
  plan.ranks[0].console = false;
  const auto c = run_plan(plan, dir);
  CHECK(c.outcome.status == Status::succeeded);
  Lines log0 = lines_of(read_file(plan.ranks[0].log_file));
  std::sort(log0.begin(), log0.end());
  CHECK(log0 == Lines{"complete", "no newline at end"});
  CHECK(read_file(plan.ranks[1].log_file) == "0\n1\n2\n");
  CHECK(c.err.empty()); // rank 0 is logged but not echoed
}

TEST_CASE("supervise: a log file that fails mid-run is reported, the run goes on", "[supervisor]") {
  TempDir dir;
  auto plan = make_plan({{fixture("list_fds")}});
  plan.ranks[0].log_file = "/dev/full";
  const auto c = run_plan(plan, dir);
  CHECK(c.outcome.status == Status::succeeded);
  CHECK(c.outcome.ranks[0].log_error == "write /dev/full: No space left on device");
  CHECK(c.out == "[rank0]: 0\n[rank0]: 1\n[rank0]: 2\n");
}

TEST_CASE("supervise: an unwritable log file is a launch failure", "[supervisor]") {
  TempDir dir;
  std::ofstream(dir.file("blocker")) << "a file, not a directory\n";
  auto plan = make_plan({{fixture("exit_with")}});
  plan.ranks[0].log_file = dir.file("blocker/rank0.log");
  const auto c = run_plan(plan, dir);
  CHECK(c.outcome.status == Status::launch_failed);
  CHECK(c.outcome.exit_code() == 125);
  CHECK(c.outcome.reason == "mkdir " + dir.file("blocker") + ": Not a directory");
  CHECK(c.outcome.ranks[0].pid == -1);
}

TEST_CASE("supervise: a closed console stops the echo, not the run", "[supervisor]") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  ::close(fds[0]); // every write now fails with EPIPE
  auto plan = make_plan({{fixture("list_fds")}});
  air::ConsoleOptions console;
  console.stdout_fd = fds[1];
  console.stderr_fd = fds[1];
  const auto o = air::supervise(plan, console);
  ::close(fds[1]);
  CHECK(o.status == Status::succeeded); // SIGPIPE was ignored
  CHECK(o.console_lines_dropped == 3);
  CHECK(o.ranks[0].tail.size() == 3);
}

TEST_CASE("RunOutcome::exit_code follows the exit-code table", "[supervisor]") {
  air::RunOutcome o;
  CHECK(o.exit_code() == 0);
  o.status = Status::timed_out;
  CHECK(o.exit_code() == 124);
  o.status = Status::launch_failed;
  CHECK(o.exit_code() == 125);
  o.status = Status::interrupted;
  o.interrupt_signal = SIGINT;
  CHECK(o.exit_code() == 130);
  o.status = Status::failed;
  o.ranks.resize(2);
  o.ranks[0].rank = 4;
  o.ranks[1].rank = 5;
  o.ranks[1].status = air::ExitStatus::killed_by(SIGABRT);
  o.root_cause_rank = 5;
  CHECK(o.exit_code() == 134);
}

namespace {

/// One-line summary of an outcome, as SupervisorChild writes it.
std::string summarize(const air::RunOutcome& o) {
  std::ostringstream summary;
  summary << static_cast<int>(o.status) << " " << o.interrupt_signal << " " << o.reason;
  for (const auto& r : o.ranks) summary << " | " << r.status.describe() << " " << r.stopped_by_air_run;
  return summary.str();
}

} // namespace

// --- signals sent to air-run: the supervisor runs in a forked child of the
// test, which the test signals like a user or a scheduler would.

namespace {

/// A supervisor running in a child process; its console goes to a file and
/// a one-line summary of the outcome to another.
struct SupervisorChild {
  pid_t pid = -1;
  std::string console_path;
  std::string summary_path;
  int killed_by = 0; ///< the signal that ended the supervisor child itself, 0 if it exited

  SupervisorChild(const air::LaunchPlan& plan, const TempDir& dir, const std::function<void()>& before = {})
      : console_path(dir.file("child.console")), summary_path(dir.file("child.summary")) {
    pid = ::fork();
    if (pid == 0) {
      if (before) before();
      const int fd = ::open(console_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      air::ConsoleOptions console;
      console.stdout_fd = fd;
      console.stderr_fd = fd;
      const auto o = air::supervise(plan, console);
      std::ofstream(summary_path) << summarize(o);
      ::_exit(o.exit_code()); // no Catch teardown, no atexit in the child
    }
  }

  bool wait_for_lines(std::size_t n) const {
    return wait_until([&] { return lines_of(read_file(console_path)).size() >= n; }, 10s);
  }

  /// Waits for the child; returns its exit code, or -1 if it did not end in time.
  int wait_exit(std::chrono::milliseconds limit = 10s) {
    int wstatus = 0;
    const bool ended = wait_until([&] { return ::waitpid(pid, &wstatus, WNOHANG) == pid; }, limit);
    if (!ended) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &wstatus, 0);
      return -1;
    }
    killed_by = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : 0;
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  }
};

} // namespace

TEST_CASE("supervise: SIGTERM to air-run is forwarded, exit 128+15", "[supervisor][signals]") {
  TempDir dir;
  auto plan = make_plan({{fixture("sleep_forever")}, {fixture("sleep_forever")}});
  SupervisorChild child(plan, dir);
  REQUIRE(child.wait_for_lines(2));
  ::kill(child.pid, SIGTERM);
  CHECK(child.wait_exit() == 143);
  CHECK(read_file(child.summary_path) ==
        "3 15 interrupted by SIGTERM | signal 15 (SIGTERM) 1 | signal 15 (SIGTERM) 1");
}

TEST_CASE("supervise: SIGINT is forwarded as SIGINT; a second one kills at once", "[supervisor][signals]") {
  TempDir dir;
  auto plan = make_plan({{fixture("ignore_term")}});
  plan.grace_period = air::Millis(60'000);
  SupervisorChild child(plan, dir);
  REQUIRE(child.wait_for_lines(1));
  ::kill(child.pid, SIGINT);
  std::this_thread::sleep_for(200ms);
  ::kill(child.pid, SIGINT); // within the first one's burst: the same request
  std::this_thread::sleep_for(air::k_stop_burst);
  ::kill(child.pid, SIGINT);          // a second one after it: now
  CHECK(child.wait_exit(10s) == 130); // well before the 60 s grace period
  CHECK(read_file(child.summary_path) == "3 2 interrupted by SIGINT | signal 9 (SIGKILL) 1");
}

TEST_CASE("supervise: SIGUSR1 is forwarded and otherwise ignored", "[supervisor][signals]") {
  TempDir dir;
  auto plan = make_plan({{fixture("wait_usr1")}});
  SupervisorChild child(plan, dir);
  REQUIRE(child.wait_for_lines(1));
  ::kill(child.pid, SIGUSR1);
  CHECK(child.wait_exit() == 0);
  CHECK(read_file(child.console_path) == "[rank0]: ready\n[rank0]: got SIGUSR1\n");
  CHECK(read_file(child.summary_path) == "0 0  | exit code 0 0");
}

TEST_CASE("supervise: a signal ignored by air-run's parent stays ignored", "[supervisor][signals]") {
  TempDir dir;
  auto plan = make_plan({{fixture("sleep_forever")}});
  SupervisorChild child(plan, dir, [] { std::signal(SIGHUP, SIG_IGN); }); // as under nohup
  REQUIRE(child.wait_for_lines(1));
  ::kill(child.pid, SIGHUP);
  std::this_thread::sleep_for(200ms);
  ::kill(child.pid, SIGTERM);
  CHECK(child.wait_exit() == 143);
  CHECK(read_file(child.summary_path) == "3 15 interrupted by SIGTERM | signal 15 (SIGTERM) 1");
}

TEST_CASE("supervise: kill -9 of air-run leaves no rank behind", "[supervisor][signals]") {
  TempDir dir;
  auto plan = make_plan({{fixture("sleep_forever")}, {fixture("sleep_forever")}});
  SupervisorChild child(plan, dir);
  REQUIRE(child.wait_for_lines(2));
  std::vector<pid_t> ranks;
  for (const auto& line : lines_of(read_file(child.console_path))) {
    int rank = 0;
    int pid = 0;
    if (std::sscanf(line.c_str(), "[rank%d]: ready %d", &rank, &pid) == 2) ranks.push_back(pid);
  }
  REQUIRE(ranks.size() == 2);
  ::kill(child.pid, SIGKILL);
  CHECK(child.wait_exit() == 137);
  for (pid_t p : ranks) CHECK(wait_until([&] { return process_gone(p); }, 3s));
}

TEST_CASE("supervise: the signal mask and SIGPIPE are restored afterwards", "[supervisor][signals]") {
  sigset_t before, after;
  ::sigprocmask(SIG_BLOCK, nullptr, &before);
  struct sigaction pipe_before {
  }, pipe_after{};
  ::sigaction(SIGPIPE, nullptr, &pipe_before);
  auto plan = make_plan({{fixture("exit_with")}});
  air::ConsoleOptions console;
  console.stdout_fd = -1;
  console.stderr_fd = -1;
  const auto o = air::supervise(plan, console);
  CHECK(o.status == Status::succeeded);
  ::sigprocmask(SIG_BLOCK, nullptr, &after);
  ::sigaction(SIGPIPE, nullptr, &pipe_after);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2})
    CHECK(sigismember(&after, sig) == sigismember(&before, sig));
  CHECK(pipe_after.sa_handler == pipe_before.sa_handler);
}

TEST_CASE("supervise: exit statuses survive an inherited SIGCHLD SIG_IGN", "[supervisor][signals]") {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGCHLD, &ignore, &old);
  TempDir dir;
  auto plan = make_plan({{fixture("exit_with"), "3"}});
  const auto c = run_plan(plan, dir);
  struct sigaction after {};
  ::sigaction(SIGCHLD, &old, &after);
  CHECK(after.sa_handler == SIG_IGN); // restored to what it was
  CHECK(c.outcome.exit_code() == 3);
  CHECK(c.outcome.reason == "rank 0 exited with exit code 3");
}

// --- OOM detection

TEST_CASE("parse_oom_kill_count reads cgroup v1 and v2 files", "[oom]") {
  CHECK(air::parse_oom_kill_count("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n") == 2u);
  CHECK(air::parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\noom_kill 17\n") == 17u);
  CHECK(air::parse_oom_kill_count("oom_kill_disable 0\nunder_oom 0\n") == std::nullopt);
  CHECK(air::parse_oom_kill_count("oom_kill x\n") == std::nullopt);
  CHECK(air::parse_oom_kill_count("") == std::nullopt);
}

TEST_CASE("oom_counter_paths finds the memory cgroup", "[oom]") {
  CHECK(air::oom_counter_paths("0::/user.slice/job.scope\n", "/cg") ==
        std::vector<std::string>{"/cg/user.slice/job.scope/memory.events",
                                 "/cg/user.slice/job.scope/memory.events.local"});
  CHECK(air::oom_counter_paths("0::/\n", "/cg") ==
        std::vector<std::string>{"/cg/memory.events", "/cg/memory.events.local"});
  CHECK(air::oom_counter_paths("5:cpu,cpuacct:/a\n4:memory:/x/y\n0::/\n", "/cg") ==
        std::vector<std::string>{"/cg/memory/x/y/memory.oom_control", "/cg/memory.events",
                                 "/cg/memory.events.local"});
  CHECK(air::oom_counter_paths("garbage\n", "/cg").empty());
}

namespace {

/// A child memory cgroup with a limit, created under the test's own memory
/// cgroup (v1 "memory" hierarchy, or v2). Empty `dir` and a `why` when this
/// machine does not allow it (not root, read-only cgroupfs, v2 without a
/// delegated subtree...).
struct MemoryCgroup {
  std::string dir;
  std::string why;

  explicit MemoryCgroup(long long limit_bytes) {
    const std::string self = read_file("/proc/self/cgroup");
    std::string v1_path, v2_path;
    for (const auto& line : lines_of(self)) {
      const auto first = line.find(':');
      const auto second = line.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) continue;
      const std::string controllers = line.substr(first + 1, second - first - 1);
      const std::string path = line.substr(second + 1);
      if (("," + controllers + ",").find(",memory,") != std::string::npos) v1_path = path;
      if (line.rfind("0::", 0) == 0) v2_path = path;
    }
    const std::string name = "/air-oom-test-" + std::to_string(::getpid());
    struct Candidate {
      std::string dir, limit_file;
    };
    std::vector<Candidate> candidates;
    if (!v1_path.empty())
      candidates.push_back(
          {"/sys/fs/cgroup/memory" + (v1_path == "/" ? "" : v1_path) + name, "memory.limit_in_bytes"});
    if (!v2_path.empty())
      candidates.push_back({"/sys/fs/cgroup" + (v2_path == "/" ? "" : v2_path) + name, "memory.max"});
    for (const auto& c : candidates) {
      if (::mkdir(c.dir.c_str(), 0755) != 0) {
        why += "mkdir " + c.dir + ": " + std::strerror(errno) + "; ";
        continue;
      }
      std::ofstream limit(c.dir + "/" + c.limit_file);
      limit << limit_bytes << std::flush;
      if (!limit) {
        why += "cannot write " + c.dir + "/" + c.limit_file + "; ";
        ::rmdir(c.dir.c_str());
        continue;
      }
      std::ofstream(c.dir + "/memory.memsw.limit_in_bytes") << limit_bytes; // no swapping out of it
      dir = c.dir;
      return;
    }
    if (candidates.empty()) why = "no memory cgroup in /proc/self/cgroup";
  }
  ~MemoryCgroup() {
    // Killed members can take a moment to leave the cgroup (EBUSY until then).
    if (!dir.empty()) wait_until([&] { return ::rmdir(dir.c_str()) == 0 || errno == ENOENT; }, 3s);
  }
  /// Moves the calling process into the cgroup.
  bool enter() const {
    std::ofstream procs(dir + "/cgroup.procs");
    procs << ::getpid() << std::flush;
    return static_cast<bool>(procs);
  }
};

} // namespace

// Runs as a fresh process (re-exec of this binary) inside the limited cgroup:
// a forked copy of the test process would carry hundreds of MB of ASan RSS
// and the OOM killer would pick it instead of the rank.
TEST_CASE("oom driver (run by the OOM test only)", "[.oom_driver]") {
  const char* summary_path = std::getenv("AIR_TEST_OOM_SUMMARY");
  REQUIRE(summary_path != nullptr);
  auto plan = make_plan({{fixture("eat_memory")}});
  air::ConsoleOptions console;
  console.stdout_fd = -1;
  console.stderr_fd = -1;
  const auto o = air::supervise(plan, console);
  std::ofstream(summary_path) << summarize(o);
  ::_exit(o.exit_code());
}

TEST_CASE("supervise: an OOM kill is named as such", "[supervisor][oom]") {
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan this test process (the stand-in for air-run) and the watchdog it
  // forks carry ASan's shadow memory, so inside a 128 MiB limit the kernel's
  // OOM killer picks them rather than the rank. The plain build runs the case.
  WARN("skipped in an AddressSanitizer build: the OOM killer would pick the sanitized launcher");
  return;
#endif
  MemoryCgroup cgroup(128LL * 1024 * 1024);
  if (cgroup.dir.empty()) {
    WARN("skipped: cannot create a memory cgroup here: " << cgroup.why);
    return;
  }
  TempDir dir;
  const std::string summary_path = dir.file("oom.summary");
  const pid_t pid = ::fork();
  if (pid == 0) {
    // air-run itself runs inside the limited cgroup, as under a Slurm or k8s limit.
    if (!cgroup.enter()) ::_exit(99);
    ::setenv("AIR_TEST_OOM_SUMMARY", summary_path.c_str(), 1);
    ::execl("/proc/self/exe", "unit_tests", "[.oom_driver]", static_cast<char*>(nullptr));
    ::_exit(98);
  }
  int wstatus = 0;
  const bool ended = wait_until([&] { return ::waitpid(pid, &wstatus, WNOHANG) == pid; }, 30s);
  if (!ended) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &wstatus, 0);
  }
  REQUIRE(ended);
  REQUIRE(WIFEXITED(wstatus)); // air-run itself survived
  CHECK(WEXITSTATUS(wstatus) == 137);
  CHECK(read_file(summary_path) == "1 0 rank 0 was killed by the OOM killer | signal 9 (SIGKILL) 0");
}

TEST_CASE("supervise: a rank's log holds its bytes exactly, over-long lines and all", "[supervisor]") {
  TempDir dir;
  // 2.5 MiB without a newline, then "after": the console splits the line, the log must not.
  auto plan = make_plan({{fixture("long_line"), std::to_string(5 * 512 * 1024)}, {fixture("partial_line")}});
  plan.ranks[0].log_file = dir.file("logs/rank0.log");
  plan.ranks[1].stream_files[0] = dir.file("logs/rank1.stdout.log");
  const auto c = run_plan(plan, dir);
  CHECK(c.outcome.status == Status::succeeded);
  const std::string log = read_file(plan.ranks[0].log_file);
  CHECK(log.size() == 5U * 512 * 1024 + 7);
  std::string expected(5U * 512 * 1024, 'a'); // appended: g++ 12 and 14 warn -Warray-bounds on operator+ here
  expected += "\nafter\n";
  CHECK(log == expected);
  // A last line without a newline stays without one.
  CHECK(read_file(plan.ranks[1].stream_files[0]) == "no newline at end");
}
