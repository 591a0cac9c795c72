// The job-wide hang and stop decisions on node 0, without sockets or a clock.
#include "core/cluster/hang_round.hpp"
#include "core/cluster/stop_round.hpp"
#include "tests/unit/catch.hpp"

#include <chrono>
#include <vector>

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

air::HangRank place(int rank) {
  air::HangRank r;
  r.rank = rank;
  r.counted = true;
  r.place = "train at train.py:3";
  return r;
}

air::NodeSteps steps(std::uint64_t at, double rate, int polling = 2) {
  air::NodeSteps s;
  s.polling = polling;
  s.steps = at;
  s.rate = rate;
  return s;
}

const Clock::time_point round_t0{std::chrono::hours(1)};

} // namespace

TEST_CASE("a hang round ends as soon as every awaited node sent all its places", "[rounds][hang]") {
  air::HangRound round;
  CHECK_FALSE(round.gathering());
  CHECK_FALSE(round.complete({0}, 2, round_t0).has_value());
  CHECK(round.start(round_t0, 10s) == 1);
  CHECK(round.deadline() == round_t0 + 10s);
  round.take_places(0, {place(0), place(1)});
  round.take_place(1, 1, 2, place(2));
  CHECK_FALSE(round.complete({0, 1}, 2, round_t0 + 1s).has_value()); // node 1 announced two
  round.take_place(1, 1, 2, place(3));
  const auto job = round.complete({0, 1}, 2, round_t0 + 2s);
  REQUIRE(job.has_value());
  CHECK(job->ranks.size() == 4);
  CHECK(job->missing_nodes.empty());
  CHECK_FALSE(round.gathering());
  CHECK_FALSE(round.complete({0, 1}, 2, round_t0 + 3s).has_value()); // handed over once
}

TEST_CASE("a hang round names the silent node at its deadline", "[rounds][hang]") {
  air::HangRound round;
  round.start(round_t0, 10s);
  round.take_places(0, {place(0)});
  CHECK_FALSE(round.complete({0, 1}, 2, round_t0 + 9s).has_value());
  const auto job = round.complete({0, 1}, 2, round_t0 + 10s);
  REQUIRE(job.has_value());
  CHECK(job->missing_nodes == std::vector<int>{1});
}

TEST_CASE("a hang round takes only its own places, up to the count announced", "[rounds][hang]") {
  air::HangRound round;
  round.take_place(1, 1, 1, place(2)); // before any round: dropped
  round.take_places(0, {place(0)});    // likewise
  CHECK(round.start(round_t0, 10s) == 1);
  round.cancel(); // the attempt ended
  CHECK(round.start(round_t0 + 20s, 10s) == 2);
  round.take_place(1, 1, 1, place(2)); // a late answer to round 1
  round.take_place(2, 1, 1, place(3));
  round.take_place(2, 1, 1, place(4)); // more than announced
  round.take_places(0, {place(0)});
  const auto job = round.complete({0, 1}, 2, round_t0 + 21s);
  REQUIRE(job.has_value());
  REQUIRE(job->ranks.size() == 2);
  CHECK(job->ranks[1].rank == 3);
}

TEST_CASE("a stop round decides once every node counted, with each count's age", "[rounds][preempt]") {
  air::StopRound round;
  CHECK(round.start(15, 1, 30s, round_t0, 1s));
  CHECK(round.gathering());
  CHECK(round.asked_at() == round_t0);
  round.take(1, steps(200, 100), std::nullopt, round_t0); // came with `preempt`: its trip is unknown
  round.take(0, steps(240, 10), Clock::duration::zero(), round_t0 + 10ms);
  CHECK_FALSE(round.decide({0, 1, 2}, 3, round_t0 + 10ms).has_value());
  round.take(2, steps(100, 10), std::chrono::milliseconds(50), round_t0 + 100ms);
  const auto stop = round.decide({0, 1, 2}, 3, round_t0 + 100ms);
  REQUIRE(stop.has_value());
  CHECK(stop->signal == 15);
  CHECK(stop->node == 1);
  CHECK(stop->grace == 29900ms);
  CHECK(stop->missing_nodes.empty());
  // Node 1's lead: 100 ms old plus twice node 2's measured trip (50 ms) = 0.2 s;
  // at 100 steps/s over 2 * 0.2 s + 0.5 s that is 90 steps past 200.
  CHECK(stop->stop_step == 291);
  CHECK(round.decided());
  CHECK_FALSE(round.deadline().has_value());
  CHECK_FALSE(round.decide({0, 1, 2}, 3, round_t0 + 200ms).has_value()); // decided once
  CHECK_FALSE(round.start(2, 2, 30s, round_t0 + 300ms, 1s));
}

TEST_CASE("a stop round decides without a silent node at its deadline and names it", "[rounds][preempt]") {
  air::StopRound round;
  CHECK(round.start(15, 0, 10s, round_t0, 1s));
  round.take(0, steps(10, 0), Clock::duration::zero(), round_t0);
  CHECK(round.deadline() == round_t0 + 1s);
  CHECK_FALSE(round.decide({0, 1}, 2, round_t0 + 999ms).has_value());
  const auto stop = round.decide({0, 1}, 2, round_t0 + 1s);
  REQUIRE(stop.has_value());
  CHECK(stop->missing_nodes == std::vector<int>{1});
  CHECK(stop->grace == 9s);
  CHECK(stop->stop_step == 11);
}

TEST_CASE("a second signal keeps the first one's round and the earlier grace end", "[rounds][preempt]") {
  air::StopRound round;
  CHECK(round.start(15, 1, 30s, round_t0, 1s));
  CHECK_FALSE(round.start(10, 0, 5s, round_t0 + 100ms, 1s));
  round.take(0, steps(0, 0, 0), Clock::duration::zero(), round_t0 + 100ms);
  round.take(1, steps(0, 0, 0), std::nullopt, round_t0 + 100ms);
  const auto stop = round.decide({0, 1}, 2, round_t0 + 200ms);
  REQUIRE(stop.has_value());
  CHECK(stop->signal == 15);
  CHECK(stop->node == 1);
  CHECK(stop->grace == 4900ms);
  round.reset();
  CHECK_FALSE(round.gathering());
  CHECK_FALSE(round.has(0));
  CHECK(round.start(15, 0, 1s, round_t0 + 1s, 1s));
}

TEST_CASE("node 0's wait at a stop's end lasts until every other node said its word or is gone",
          "[rounds][preempt][requeue]") {
  air::StopEnds ends;
  CHECK(ends.complete(1)); // one node: nothing to wait for
  CHECK_FALSE(ends.complete(3));
  ends.take(2, 2, 2); // a fast node's word may come first
  CHECK_FALSE(ends.complete(3));
  CHECK(ends.unsaved(3) == std::vector<int>{1}); // node 1 has not said it stopped
  ends.take(1, 2, 1);                            // one of its two ranks did not stop at the step
  CHECK(ends.complete(3));
  CHECK(ends.unsaved(3) == std::vector<int>{1});
  ends.take(1, 2, 2);
  CHECK(ends.unsaved(3).empty());

  air::StopEnds lost;
  lost.gone(1); // its agent ended without a word: the wait is over, the node is not saved
  CHECK(lost.complete(2));
  CHECK(lost.unsaved(2) == std::vector<int>{1});
}

TEST_CASE("node 0 requeues after Slurm's warning only when every node's asked ranks stopped",
          "[rounds][preempt][requeue]") {
  air::PreemptionReport p;
  p.signal = 10; // SIGUSR1
  p.stop_step = 53;
  p.polling_ranks = {0, 1};
  p.stopped_ranks = {0, 1};
  p.job_wide = true;
  CHECK(air::requeue_verdict(p).requeue);

  p.unsaved_nodes = {1}; // node 1's save did not finish (or it never said so)
  auto v = air::requeue_verdict(p);
  CHECK_FALSE(v.requeue);
  CHECK(v.why_not == "node 1 did not say that every rank asked stopped at step 53 and exited");
  p.unsaved_nodes = {1, 3};
  CHECK(air::requeue_verdict(p).why_not ==
        "nodes 1, 3 did not say that every rank asked stopped at step 53 and exited");
  p.unsaved_nodes.clear();

  p.stopped_ranks = {0}; // node 0's own rank 1 did not stop there: nothing complete, nothing to say
  v = air::requeue_verdict(p);
  CHECK_FALSE(v.requeue);
  CHECK(v.why_not.empty());
  p.stopped_ranks = {0, 1};
  p.signal = 15; // SIGTERM: Slurm ends (or requeues) the job itself
  CHECK_FALSE(air::requeue_verdict(p).requeue);
  CHECK(air::requeue_verdict(p).why_not.empty());
}

TEST_CASE("a hang round gives each place its node's work reading, and does not wait for a done node",
          "[rounds][hang][quiet]") {
  air::HangRound round;
  CHECK(round.start(round_t0, 10s) == 1);
  air::HangRank saving = place(0);
  saving.working = true; // node 0's own places carry it
  round.take_places(0, {saving, place(1)});
  round.take_work(1, 1, 3, false, false);
  round.take_work(1, 1, 2, true, false);
  round.take_work(2, 1, 3, true, true); // another round's: dropped
  round.take_place(1, 1, 2, place(2));
  round.take_place(1, 1, 2, place(3));
  auto job = round.complete({0, 1}, 3, round_t0 + 1s, {2});
  REQUIRE(job.has_value());
  REQUIRE(job->ranks.size() == 4);
  CHECK(job->ranks[0].working);
  CHECK_FALSE(job->ranks[1].working);
  CHECK(job->ranks[2].working);
  CHECK_FALSE(job->ranks[3].working);
  CHECK_FALSE(job->ranks[3].exited_ok);
  CHECK(job->missing_nodes.empty());
  CHECK(job->done_nodes == std::vector<int>{2});

  // The next round starts without the last one's readings.
  CHECK(round.start(round_t0 + 20s, 10s) == 2);
  round.take_places(0, {place(0)});
  round.take_place(2, 1, 1, place(3));
  job = round.complete({0, 1}, 2, round_t0 + 21s);
  REQUIRE(job.has_value());
  CHECK_FALSE(job->ranks[1].working);
}
