// The hang clock (core/hang/hang_clock.hpp): when quiet ranks make a
// hang, with the start-up allowance and once per quiet spell.
#include "core/hang/hang_clock.hpp"
#include "tests/unit/catch.hpp"

#include <chrono>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const Clock::time_point clock_t0 = Clock::time_point() + 1000s;

} // namespace

TEST_CASE("without --hang-timeout the hang clock never wakes the loop", "[hang_clock]") {
  air::HangClock clock(std::nullopt, clock_t0);
  CHECK_FALSE(clock.next_deadline());
  CHECK_FALSE(clock.due(clock_t0 + 24h));
}

TEST_CASE("before the first progress a short --hang-timeout waits the start-up allowance", "[hang_clock]") {
  air::HangClock clock(5s, clock_t0);
  CHECK(clock.quiet_limit() == 60s);
  REQUIRE(clock.next_deadline());
  CHECK(*clock.next_deadline() == clock_t0 + 60s);
  CHECK_FALSE(clock.due(clock_t0 + 59s));
  CHECK(clock.due(clock_t0 + 60s));
  // A timeout longer than the allowance is the limit from the start.
  air::HangClock patient(90s, clock_t0);
  CHECK(patient.quiet_limit() == 90s);
  CHECK_FALSE(patient.due(clock_t0 + 89s));
}

TEST_CASE("progress starts a new quiet spell, diagnosed once", "[hang_clock]") {
  air::HangClock clock(5s, clock_t0);
  clock.progress(clock_t0 + 10s);
  CHECK(clock.quiet_limit() == 5s); // progress seen: no allowance any more
  CHECK(*clock.next_deadline() == clock_t0 + 15s);
  CHECK_FALSE(clock.due(clock_t0 + 14s));
  REQUIRE(clock.due(clock_t0 + 15s));
  clock.diagnosing();
  CHECK(clock.diagnosed());
  CHECK_FALSE(clock.next_deadline()); // not again in this spell
  CHECK_FALSE(clock.due(clock_t0 + 1h));
  CHECK(clock.quiet_s(clock_t0 + 17s) == 7.0); // from the spell's last progress
  clock.progress(clock_t0 + 20s);
  CHECK_FALSE(clock.diagnosed());
  CHECK(*clock.next_deadline() == clock_t0 + 25s);
}

TEST_CASE("a working rank starts a new spell but keeps the start-up allowance", "[hang_clock]") {
  air::HangClock clock(5s, clock_t0);
  clock.busy(clock_t0 + 60s); // still importing torch at the allowance's end
  CHECK(clock.quiet_limit() == 60s);
  CHECK_FALSE(clock.due(clock_t0 + 100s));
  CHECK(*clock.next_deadline() == clock_t0 + 120s);
  clock.progress(clock_t0 + 130s);
  clock.diagnosing();
  clock.busy(clock_t0 + 140s); // a diagnosed spell ends too
  CHECK_FALSE(clock.diagnosed());
  CHECK(*clock.next_deadline() == clock_t0 + 145s);
}
