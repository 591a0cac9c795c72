// The teardown (core/run/teardown.hpp): the first signal to every rank's
// group, the grace deadline, then SIGKILL; and the root cause it follows
// (core/run/exits.hpp). A real child in its own group that ignores SIGTERM
// stands in for a rank that does not stop.
#include "core/run/exits.hpp"
#include "core/run/teardown.hpp"
#include "tests/unit/catch.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

air::LaunchPlan plan_of(int ranks) {
  air::LaunchPlan plan;
  for (int i = 0; i < ranks; ++i) {
    air::RankPlan r;
    r.rank = i;
    r.local_rank = i;
    plan.ranks.push_back(r);
  }
  return plan;
}

/// A child leading its own process group that ignores SIGTERM, ready once this returns.
pid_t stubborn_child() {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGTERM, SIG_IGN);
    ::setpgid(0, 0);
    [[maybe_unused]] const auto n = ::write(ready[1], "r", 1);
    for (;;) ::pause();
  }
  ::setpgid(pid, pid);
  char byte;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  ::close(ready[1]);
  return pid;
}

} // namespace

TEST_CASE("teardown: the first signal, the grace period, then SIGKILL", "[teardown]") {
  const air::LaunchPlan plan = plan_of(2);
  air::RunOutcome out;
  air::RankTable ranks(plan, air::ConsoleOptions{}, out);
  const pid_t pid = stubborn_child();
  ranks.started(ranks[0], pid); // rank 1 never started

  air::Teardown teardown(3s);
  const auto t0 = Clock::now();
  CHECK_FALSE(teardown.active());
  CHECK_FALSE(teardown.next_deadline(t0, false));
  CHECK_FALSE(teardown.kill_due(t0 + 1h));
  CHECK(teardown.groups_gone(ranks)); // not begun: nothing to wait for

  REQUIRE(teardown.begin(SIGTERM, ranks, nullptr, t0));
  CHECK(ranks[0].teardown_signal == SIGTERM);
  CHECK(ranks[1].teardown_signal == 0);
  CHECK_FALSE(teardown.begin(SIGINT, ranks, nullptr, t0 + 1s)); // once per run
  CHECK(ranks[0].teardown_signal == SIGTERM);
  CHECK(teardown.grace_deadline() == t0 + 3s);
  CHECK(*teardown.next_deadline(t0, false) == t0 + 3s);
  CHECK(*teardown.next_deadline(t0, true) == t0 + 50ms); // only descendants left: look again soon
  CHECK_FALSE(teardown.kill_due(t0 + 2999ms));
  CHECK(teardown.kill_due(t0 + 3s));
  CHECK_FALSE(teardown.groups_gone(ranks)); // it ignored SIGTERM

  teardown.kill(ranks, out, nullptr, t0 + 3s);
  CHECK(teardown.killed());
  CHECK(teardown.killed_at() == t0 + 3s);
  CHECK(out.ranks[0].killed); // it outlived the first signal
  CHECK_FALSE(out.ranks[1].killed);
  CHECK_FALSE(teardown.kill_due(t0 + 1h));
  CHECK_FALSE(teardown.next_deadline(t0 + 4s, true));
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

TEST_CASE("teardown notice: what stops, how, and for how long", "[teardown]") {
  const std::string one = air::teardown_notice(1, SIGINT, std::chrono::milliseconds(30'000));
  CHECK(one.rfind("air-run: stopping 1 rank (SIGINT), up to ", 0) == 0);
  CHECK(one.find("; Ctrl-C again to kill now\n") != std::string::npos);
  CHECK(air::teardown_notice(4, SIGTERM, std::chrono::milliseconds(5'000)).find("4 ranks (SIGTERM)") !=
        std::string::npos);
}

TEST_CASE("exits: a lost peer waits for its cause, which becomes the root cause", "[exits]") {
  const air::LaunchPlan plan = plan_of(3);
  air::RunOutcome out;
  air::RankTable ranks(plan, air::ConsoleOptions{}, out);
  air::Exits exits(ranks, out);
  const auto t0 = Clock::now();
  CHECK_FALSE(exits.fail(ranks[1], "rank 1 exited with 1", true, t0)); // a symptom: wait
  CHECK(out.status == air::RunOutcome::Status::failed);
  CHECK(out.root_cause_rank == 1);
  REQUIRE(exits.settling());
  CHECK(*exits.settle_deadline() == t0 + 1s);
  ranks.started(ranks[2], 999'999); // still running: the deadline decides
  CHECK_FALSE(exits.settle_due(t0 + 999ms));
  CHECK(exits.settle_due(t0 + 1s));
  CHECK_FALSE(exits.fail(ranks[0], "rank 0 exited with 1", true, t0)); // another symptom: no news
  CHECK(out.root_cause_rank == 1);
  CHECK(exits.fail(ranks[2], "rank 2 was killed by SIGSEGV", false, t0)); // the cause: tear down now
  CHECK(out.root_cause_rank == 2);
  CHECK(out.reason == "rank 2 was killed by SIGSEGV");
  exits.settled();
  CHECK_FALSE(exits.settling());
  CHECK_FALSE(exits.fail(ranks[0], "rank 0 exited with 1", false, t0)); // not the first failure
  CHECK(out.root_cause_rank == 2);
  ranks.forget(ranks[2]);
}
