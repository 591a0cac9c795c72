// Which connections node 0 keeps while the nodes join: strangers flooding the
// control port cannot push a real node's connection out.
#include "core/cluster/join_admission.hpp"
#include "tests/unit/catch.hpp"

#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using Verdict = air::Admission::Verdict;

const Clock::time_point admission_t0 = Clock::time_point() + std::chrono::hours(1);

air::WaitingConnection from(const std::string& source, int connected_ms, bool authenticated = false) {
  return {source, authenticated, admission_t0 + milliseconds(connected_ms)};
}

const air::AdmissionLimits limits{8, 3, milliseconds(1000)};

} // namespace

TEST_CASE("admission: room left means admitted", "[control][admission]") {
  CHECK(air::admit_connection({}, "10.0.0.2", admission_t0, limits).verdict == Verdict::admit);
  CHECK(air::admit_connection({from("10.0.0.9", 0), from("10.0.0.9", 1)}, "10.0.0.2", admission_t0, limits)
            .verdict == Verdict::admit);
}

TEST_CASE("admission: a flooding source makes room only from its own silent connections",
          "[control][admission]") {
  // A real node from 10.0.0.2, connected first; a stranger at 10.0.0.66 holds its limit.
  std::vector<air::WaitingConnection> waiting{from("10.0.0.2", 0), from("10.0.0.66", 0),
                                              from("10.0.0.66", 10), from("10.0.0.66", 20)};
  // While the stranger's connections are fresh, its next one is refused.
  CHECK(air::admit_connection(waiting, "10.0.0.66", admission_t0 + milliseconds(500), limits).verdict ==
        Verdict::refuse);
  // Past the grace time its own oldest goes, never the real node's (older still).
  const auto later = air::admit_connection(waiting, "10.0.0.66", admission_t0 + milliseconds(1500), limits);
  REQUIRE(later.verdict == Verdict::evict_then_admit);
  CHECK(waiting[later.evict].source == "10.0.0.66");
  CHECK(waiting[later.evict].connected == admission_t0);
  // The real node's source still has room.
  CHECK(air::admit_connection(waiting, "10.0.0.2", admission_t0 + milliseconds(1500), limits).verdict ==
        Verdict::admit);
}

TEST_CASE("admission: when every slot is taken the busiest source makes room", "[control][admission]") {
  std::vector<air::WaitingConnection> waiting{
      from("10.0.0.2", 0),  from("10.0.0.3", 0),  from("10.0.0.66", 5), from("10.0.0.66", 6),
      from("10.0.0.67", 7), from("10.0.0.67", 8), from("10.0.0.67", 9), from("10.0.0.4", 1)};
  const auto a = air::admit_connection(waiting, "10.0.0.5", admission_t0 + milliseconds(2000), limits);
  REQUIRE(a.verdict == Verdict::evict_then_admit);
  CHECK(waiting[a.evict].source == "10.0.0.67");
  CHECK(waiting[a.evict].connected == admission_t0 + milliseconds(7));
  // Nothing past the grace time: the newcomer waits for its retry.
  CHECK(air::admit_connection(waiting, "10.0.0.5", admission_t0 + milliseconds(500), limits).verdict ==
        Verdict::refuse);
}

TEST_CASE("admission: an authenticated connection is never pushed out", "[control][admission]") {
  std::vector<air::WaitingConnection> waiting{from("127.0.0.1", 0, true), from("127.0.0.1", 1, true),
                                              from("127.0.0.1", 2, true)};
  CHECK(air::admit_connection(waiting, "127.0.0.1", admission_t0 + milliseconds(60'000), limits).verdict ==
        Verdict::refuse);
  CHECK_FALSE(air::connection_to_drop(waiting, admission_t0 + milliseconds(60'000), limits).has_value());
}

TEST_CASE("admission: out of descriptors, the busiest source's oldest silent connection goes",
          "[control][admission]") {
  std::vector<air::WaitingConnection> waiting{from("10.0.0.2", 0), from("10.0.0.66", 3),
                                              from("10.0.0.66", 1)};
  const auto drop = air::connection_to_drop(waiting, admission_t0 + milliseconds(1500), limits);
  REQUIRE(drop.has_value());
  CHECK(*drop == 2);
  CHECK_FALSE(air::connection_to_drop(waiting, admission_t0 + milliseconds(900), limits).has_value());
}
