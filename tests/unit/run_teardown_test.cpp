// The teardown (core/run/teardown.hpp): the first signal to every rank's
// group, the grace deadline, then SIGKILL. A real child in its own group
// that ignores SIGTERM stands in for a rank that does not stop.
#include "core/run/teardown.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/child_fixture.hpp"
#include "tests/unit/plan_fixture.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// A child leading its own process group that ignores SIGTERM, ready once this returns.
pid_t stubborn_child() { return air::test::child_ignoring(SIGTERM, true); }

} // namespace

TEST_CASE("teardown: the first signal, the grace period, then SIGKILL", "[teardown]") {
  const air::LaunchPlan plan = air::test::bare_plan(2);
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
  const std::string term = air::teardown_notice(4, SIGTERM, std::chrono::milliseconds(5'000));
  CHECK(term.find("4 ranks (SIGTERM)") != std::string::npos);
  // A scheduler's SIGTERM is no keyboard's: no "Ctrl-C" in its hint.
  CHECK(term.find("; a second signal kills now\n") != std::string::npos);
  CHECK(term.find("Ctrl-C") == std::string::npos);
}
