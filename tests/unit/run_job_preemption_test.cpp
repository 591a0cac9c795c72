// A preemption decided across nodes: node 0's choice of the job's stop step.
#include "core/run/job_preemption.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/control_fixture.hpp"

#include <limits>
#include <vector>

using air::NodeSteps;
using air::pick_stop_step;

using air_test::node_steps;

TEST_CASE("with no rate and no lead the stop step is the furthest rank's next one", "[preempt]") {
  // What one node picks today: nothing moves while the request is written.
  CHECK(pick_stop_step({node_steps(0, 10, 0, 0), node_steps(1, 12, 0, 0)}) == 13);
}

TEST_CASE("no counted step anywhere stops at the next should_stop()", "[preempt]") {
  CHECK(pick_stop_step({node_steps(0, 0, 0, 0.1), node_steps(1, 0, 0, 0.1)}) == 0);
  CHECK(pick_stop_step({}) == 0);
}

TEST_CASE("the stop step covers what the fastest node makes while the decision flies", "[preempt]") {
  // Node 1 is behind but fast: 100 steps/s over twice a 0.1 s lead plus the
  // 0.5 s slack is 70 steps, so it may be at 200 + 70 when stopat lands.
  const auto step = pick_stop_step({node_steps(0, 240, 10, 0.0), node_steps(1, 200, 100, 0.1)});
  CHECK(step == 271);
  // max + 1, as one node picks, would be passed by node 1 within the round trip.
  CHECK(step > 240 + 1);
  // Node 0's own lead is 0, yet its rate still counts for the slack.
  CHECK(pick_stop_step({node_steps(0, 240, 10, 0.0)}) == 246);
}

TEST_CASE("a step that may end right after it was counted is covered", "[preempt]") {
  // 0.2 steps/s over 0.5 s is a tenth of a step: rounded up to one, as the
  // rank may be about to finish it, so it stops at the one after.
  CHECK(pick_stop_step({node_steps(0, 7, 0.2, 0.0)}) == 9);
}

TEST_CASE("nodes whose ranks do not poll do not count", "[preempt]") {
  CHECK(pick_stop_step({node_steps(0, 5, 1, 0), node_steps(1, 900, 50, 0.1, 0)}) == 7);
  CHECK(pick_stop_step({node_steps(1, 900, 50, 0.1, 0)}) == 0);
}

TEST_CASE("nonsense rates and leads neither overflow nor move the step back", "[preempt]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(pick_stop_step({node_steps(0, 10, nan, nan)}) == 11);
  CHECK(pick_stop_step({node_steps(0, 10, -5, -1)}) == 11);
  const auto huge = pick_stop_step({node_steps(0, 10, 1e300, 1e300)});
  CHECK(huge > 10);
  CHECK(huge < std::numeric_limits<std::uint64_t>::max() / 2);
  const auto top = pick_stop_step({node_steps(0, std::numeric_limits<std::uint64_t>::max(), 10, 0)});
  CHECK(top > std::numeric_limits<std::uint64_t>::max() / 2); // no wrap-around to a small step
}
