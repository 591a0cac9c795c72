// Stack dumps (core/run/stack_dumps.hpp): when a rank's dump counts as
// whole. faulthandler writes a dump in many small writes, and a loaded
// machine can hold the rank off the CPU between two of them; the test writes
// the dump itself, in parts, for a real child that ignores the signal.
#include "core/run/stack_dumps.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/plan_fixture.hpp"
#include "tests/unit/temp_dir.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int k_signal = SIGUSR2;

/// A child that ignores k_signal (as an armed rank survives it), ready once this returns.
pid_t armed_child() {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(k_signal, SIG_IGN);
    [[maybe_unused]] const auto n = ::write(ready[1], "r", 1);
    for (;;) ::pause();
  }
  char byte;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  ::close(ready[1]);
  return pid;
}

void append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

const std::string k_thread = "Thread 0x00007f1 (most recent call first):\n"
                             "  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n"
                             "  File \"/usr/lib/python3.11/threading.py\", line 1038 in _bootstrap\n"
                             "\n";
const std::string k_main_head = "Current thread 0x00007f0 (most recent call first):\n"
                                "  File \"/work/stuck.py\", line 7 in wait_for_peer_in_allreduce\n"
                                "  File \"/work/stuck.py\", line ";
const std::string k_main_rest = "12 in <module>\n";

/// A rank table of one running rank whose stack file is `stack_file`.
struct OneRank {
  air::LaunchPlan plan = air::test::bare_plan(1);
  air::RunOutcome out;
  std::optional<air::RankTable> ranks;
  pid_t pid = armed_child();

  explicit OneRank(const std::string& stack_file) {
    plan.ranks[0].stack_file = stack_file;
    ranks.emplace(plan, air::ConsoleOptions{}, out);
    ranks->started((*ranks)[0], pid);
  }
  ~OneRank() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

} // namespace

TEST_CASE("a dump is whole by its look when it ends with the main thread's outermost frame", "[stacks]") {
  CHECK(air::stack_dump_ends_main_thread(k_thread + k_main_head + k_main_rest));
  CHECK(air::stack_dump_ends_main_thread("  File \"<frozen runpy>\", line 198 in _run_module_as_main\n"));
  CHECK_FALSE(air::stack_dump_ends_main_thread(k_thread));               // another thread's outermost frame
  CHECK_FALSE(air::stack_dump_ends_main_thread(k_thread + k_main_head)); // cut mid-line
  CHECK_FALSE(air::stack_dump_ends_main_thread("  File \"/work/stuck.py\", line 12 in <module>"));
  CHECK_FALSE(air::stack_dump_ends_main_thread(""));
  CHECK_FALSE(air::stack_dump_ends_main_thread("print('in <module>')\n")); // not a frame line
}

TEST_CASE("a dump cut mid-line by a pause is not taken, however long the pause", "[stacks]") {
  air::test::TempDir dir;
  const std::string file = dir.write("stack", "");
  OneRank one(file);
  air::StackDumps dumps(*one.ranks, k_signal);
  const auto t0 = Clock::now();
  REQUIRE(dumps.request(air::StackPurpose::timeout, t0));
  CHECK_FALSE(dumps.due(t0 + 50ms, true)); // nothing written yet

  append(file, k_thread + k_main_head); // the rank is taken off the CPU here
  CHECK_FALSE(dumps.due(t0 + 100ms, true));
  CHECK_FALSE(dumps.due(t0 + 150ms, true));  // the same size for a check: not enough
  CHECK_FALSE(dumps.due(t0 + 1500ms, true)); // nor for longer: it ends mid-line
  append(file, k_main_rest);
  CHECK(dumps.due(t0 + 1550ms, true)); // the main thread's outermost frame: at once

  dumps.collect(one.out, t0 + 1550ms);
  CHECK(one.out.ranks[0].stack == k_thread + k_main_head + k_main_rest);
  CHECK_FALSE(dumps.waiting());
}

TEST_CASE("a dump that ends elsewhere is taken once it stops growing for a while", "[stacks]") {
  air::test::TempDir dir;
  const std::string file = dir.write("stack", "old dump\n");
  OneRank one(file);
  air::StackDumps dumps(*one.ranks, k_signal);
  const auto t0 = Clock::now();
  REQUIRE(dumps.request(air::StackPurpose::timeout, t0));

  append(file, k_thread); // a main thread in shutdown would end like this too
  CHECK_FALSE(dumps.due(t0 + 50ms, true));
  CHECK_FALSE(dumps.due(t0 + 100ms, true)); // one check unchanged: the pause may go on
  append(file, k_thread);                   // it did: more came
  CHECK_FALSE(dumps.due(t0 + 200ms, true));
  CHECK_FALSE(dumps.due(t0 + 450ms, true));
  CHECK(dumps.due(t0 + 500ms, true)); // unchanged for 300 ms, ending a line
  dumps.collect(one.out, t0 + 500ms);
  CHECK(one.out.ranks[0].stack == k_thread + k_thread); // only what came after the signal
}

TEST_CASE("the deadline ends the wait for a dump that never completes", "[stacks]") {
  air::test::TempDir dir;
  const std::string file = dir.write("stack", "");
  OneRank one(file);
  air::StackDumps dumps(*one.ranks, k_signal);
  const auto t0 = Clock::now();
  REQUIRE(dumps.request(air::StackPurpose::timeout, t0));
  append(file, k_main_head);
  CHECK_FALSE(dumps.due(t0 + 1999ms, true));
  CHECK(dumps.due(t0 + 2s, true));
}
