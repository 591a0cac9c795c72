// Exits (core/run/exits.hpp): the root cause, and the settle wait a rank
// that only lost its peer gets for the rank that caused it.
#include "core/run/exits.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/plan_fixture.hpp"

#include <chrono>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

} // namespace

TEST_CASE("exits: a lost peer waits for its cause, which becomes the root cause", "[exits]") {
  const air::LaunchPlan plan = air::test::bare_plan(3);
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

TEST_CASE("exits: with every rank ended, the wait runs on only while other nodes may tell the cause",
          "[exits]") {
  const air::LaunchPlan plan = air::test::bare_plan(1);
  air::RunOutcome out;
  air::RankTable ranks(plan, air::ConsoleOptions{}, out);
  air::Exits exits(ranks, out);
  const auto t0 = Clock::now();
  CHECK_FALSE(exits.fail(ranks[0], "rank 0 exited with 1", true, t0)); // its only rank lost its peer
  REQUIRE(ranks.all_ended());
  CHECK(exits.settle_due(t0));                     // one node: no one else can say why
  CHECK_FALSE(exits.settle_due(t0 + 999ms, true)); // another node's word (or loss) may come
  CHECK(exits.settle_due(t0 + 1s, true));
}
