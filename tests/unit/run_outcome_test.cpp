#include "core/run/outcome.hpp"
#include "tests/unit/catch.hpp"

#include <csignal>

TEST_CASE("a rank's end is the teardown's only when the signal air-run sent ended it", "[outcome]") {
  using air::ended_by_teardown_signal;
  using air::ExitStatus;
  SECTION("never signalled: never stopped") {
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::killed_by(SIGTERM), 0));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(0), 0));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(1), 0));
  }
  SECTION("died of the signal sent, or of the SIGKILL after the grace period") {
    CHECK(ended_by_teardown_signal(ExitStatus::killed_by(SIGTERM), SIGTERM));
    CHECK(ended_by_teardown_signal(ExitStatus::killed_by(SIGINT), SIGINT));
    CHECK(ended_by_teardown_signal(ExitStatus::killed_by(SIGKILL), SIGTERM));
    CHECK(ended_by_teardown_signal(ExitStatus::killed_by(SIGKILL), SIGKILL));
  }
  SECTION("a wrapper's 128+N for that signal, or a clean exit after catching it") {
    CHECK(ended_by_teardown_signal(ExitStatus::exited_with(128 + SIGTERM), SIGTERM));
    CHECK(ended_by_teardown_signal(ExitStatus::exited_with(128 + SIGKILL), SIGTERM));
    CHECK(ended_by_teardown_signal(ExitStatus::exited_with(0), SIGTERM));
  }
  SECTION("its own exit code or another signal is its own failure, signal sent or not") {
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(1), SIGTERM));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(3), SIGKILL));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(128 + SIGINT), SIGTERM));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::killed_by(SIGSEGV), SIGTERM));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::killed_by(SIGABRT), SIGINT));
  }
}

TEST_CASE("an asked rank stopped at the stop step only when it exited 0 there", "[outcome][preempt]") {
  using air::ExitStatus;
  air::RunOutcome o;
  o.status = air::RunOutcome::Status::preempted;
  const auto rank = [](int n, ExitStatus status, std::uint64_t steps, bool stopped) {
    air::RankOutcome r;
    r.rank = n;
    r.status = status;
    r.steps = steps;
    r.stopped_by_air_run = stopped;
    return r;
  };
  o.ranks = {rank(0, ExitStatus::exited_with(0), 37, true),      // stopped at the step
             rank(1, ExitStatus::killed_by(SIGTERM), 36, false), // a SIGTERM air-run did not send
             rank(2, ExitStatus::exited_with(0), 36, true),      // its loop ended before the step
             rank(3, ExitStatus::killed_by(SIGTERM), 36, true)}; // never asked: signalled at once
  air::PreemptionReport p;
  p.stop_step = 37;
  p.polling_ranks = {0, 1, 2};
  p.signalled_ranks = {3};
  o.preemption = p;
  air::settle_preemption(o);
  CHECK(o.preemption->stopped_ranks == std::vector<int>{0});
  CHECK(o.ranks[0].stopped_by_air_run);
  CHECK_FALSE(o.ranks[1].stopped_by_air_run);
  CHECK_FALSE(o.ranks[2].stopped_by_air_run);      // it ended on its own
  CHECK(o.ranks[3].stopped_by_air_run);            // not asked: left as the teardown judged it
  CHECK(air::stopped_at_stop_step(o.ranks[2], 0)); // "at its next should_stop()": any clean exit
}

TEST_CASE("a stop that no asked rank reached is no preemption", "[outcome][preempt]") {
  using air::ExitStatus;
  air::RunOutcome o;
  o.status = air::RunOutcome::Status::preempted;
  o.interrupt_signal = SIGTERM;
  o.reason = "preempted by SIGTERM on node 0; every node's ranks stop at step 931";
  air::RankOutcome r0, r1;
  r0.rank = 0;
  r0.status = ExitStatus::killed_by(SIGKILL);
  r0.steps = 915;
  r1.rank = 1;
  r1.status = ExitStatus::killed_by(SIGTERM);
  r1.steps = 915;
  o.ranks = {r0, r1};
  air::PreemptionReport p;
  p.signal = SIGTERM;
  p.stop_step = 931;
  p.polling_ranks = {0, 1};
  p.cause = "time_limit";
  o.preemption = p;
  air::settle_preemption(o);
  CHECK(o.status == air::RunOutcome::Status::interrupted);
  CHECK(o.exit_code() == 143);
  CHECK(o.reason == "stopped by SIGTERM (Slurm's time limit), but no rank stopped at step 931: the 2 ranks "
                    "asked to stop there ended otherwise");
  SECTION("one that some reached says how many") {
    air::RunOutcome partial = o;
    partial.status = air::RunOutcome::Status::preempted;
    partial.preemption->cause.clear();
    partial.ranks[0].status = ExitStatus::exited_with(0);
    partial.ranks[0].steps = 931;
    air::settle_preemption(partial);
    CHECK(partial.status == air::RunOutcome::Status::preempted);
    CHECK(partial.reason == "preempted by SIGTERM; 1 of the 2 ranks asked stopped at step 931");
  }
}
