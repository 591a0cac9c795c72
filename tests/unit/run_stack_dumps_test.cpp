// Stack dumps (core/run/stack_dumps.hpp): when a rank's dump counts as
// whole. faulthandler writes a dump in many small writes, and a loaded
// machine can hold the rank off the CPU between two of them; the test writes
// the dump itself, in parts, for a real child that ignores the signal.
#include "core/run/stack_dumps.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/child_fixture.hpp"
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

/// One running rank, a child with a handler for k_signal as an armed rank
/// has, whose stack file starts as `before`; asked for its stack at t0.
struct AskedRank {
  air::test::TempDir dir;
  std::string file;
  air::LaunchPlan plan = air::test::bare_plan(1);
  air::RunOutcome out;
  std::optional<air::RankTable> ranks;
  std::optional<air::StackDumps> dumps;
  pid_t pid = air::test::child_catching(k_signal);
  Clock::time_point t0 = Clock::now();

  explicit AskedRank(const std::string& before = "") : file(dir.write("stack", before)) {
    plan.ranks[0].stack_file = file;
    ranks.emplace(plan, air::ConsoleOptions{}, out);
    ranks->started((*ranks)[0], pid);
    dumps.emplace(*ranks, k_signal);
    REQUIRE(dumps->request(air::StackPurpose::timeout, t0));
  }
  ~AskedRank() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  bool due(Clock::duration after) { return dumps->due(t0 + after, true); }
};

} // namespace

TEST_CASE("a rank whose handler is not installed is never asked for its stack", "[stacks]") {
  // Its stack file exists (it armed, then exec'd another program, or the file
  // is an earlier attempt's), but the signal has no handler there: its
  // default action would kill it. This child ignores it, so the test survives
  // a signal sent all the same.
  air::test::TempDir dir;
  air::LaunchPlan plan = air::test::bare_plan(1);
  plan.ranks[0].stack_file = dir.write("stack", "");
  air::RunOutcome out;
  air::RankTable ranks(plan, air::ConsoleOptions{}, out);
  const pid_t pid = air::test::child_ignoring(k_signal, false);
  ranks.started(ranks[0], pid);
  air::StackDumps dumps(ranks, k_signal);
  CHECK_FALSE(dumps.request(air::StackPurpose::show, Clock::now()));
  CHECK_FALSE(dumps.waiting());
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

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
  AskedRank rank;
  CHECK_FALSE(rank.due(50ms)); // nothing written yet

  append(rank.file, k_thread + k_main_head); // the rank is taken off the CPU here
  CHECK_FALSE(rank.due(100ms));
  CHECK_FALSE(rank.due(150ms));  // the same size for a check: not enough
  CHECK_FALSE(rank.due(1500ms)); // nor for longer: it ends mid-line
  append(rank.file, k_main_rest);
  CHECK(rank.due(1550ms)); // the main thread's outermost frame: at once

  rank.dumps->collect(rank.out, rank.t0 + 1550ms);
  CHECK(rank.out.ranks[0].stack == k_thread + k_main_head + k_main_rest);
  CHECK_FALSE(rank.dumps->waiting());
}

TEST_CASE("a dump that ends elsewhere is taken once it stops growing for a while", "[stacks]") {
  AskedRank rank("old dump\n");

  append(rank.file, k_thread); // a main thread in shutdown would end like this too
  CHECK_FALSE(rank.due(50ms));
  CHECK_FALSE(rank.due(100ms)); // one check unchanged: the pause may go on
  append(rank.file, k_thread);  // it did: more came
  CHECK_FALSE(rank.due(200ms));
  CHECK_FALSE(rank.due(450ms));
  CHECK(rank.due(500ms)); // unchanged for 300 ms, ending a line
  rank.dumps->collect(rank.out, rank.t0 + 500ms);
  CHECK(rank.out.ranks[0].stack == k_thread + k_thread); // only what came after the signal
}

TEST_CASE("the deadline ends the wait for a dump that never completes", "[stacks]") {
  AskedRank rank;
  append(rank.file, k_main_head);
  CHECK_FALSE(rank.due(1999ms));
  CHECK(rank.due(2s));
}
