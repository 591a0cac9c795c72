// Which stop signals are one request: Slurm's bursts against a second interrupt.
#include "core/run/stop_signals.hpp"
#include "tests/unit/catch.hpp"

#include <csignal>

using air::StopSignals;
using air::StopVerdict;
using namespace std::chrono_literals;

namespace {
const StopSignals::Clock::time_point t0{};
} // namespace

TEST_CASE("slurmd's SIGTERM, SIGCONT, SIGTERM is one request", "[preempt][stop_signals]") {
  // A time limit or a preemption (REQUEUE): the pair comes within 3-10 ms.
  StopSignals s;
  CHECK(s.hear(SIGTERM, t0) == StopVerdict::first);
  CHECK(s.hear(SIGTERM, t0 + 10ms) == StopVerdict::same);
  // A wrapper's forwarded copy, a loaded machine: still within the burst.
  CHECK(s.hear(SIGTERM, t0 + 900ms) == StopVerdict::same);
}

TEST_CASE("a second interrupt after the burst kills now", "[preempt][stop_signals]") {
  StopSignals s;
  CHECK(s.hear(SIGTERM, t0) == StopVerdict::first);
  CHECK(s.hear(SIGINT, t0 + air::k_stop_burst) == StopVerdict::now);
  // The burst counts from the first signal: a stream of them cannot stretch it.
  StopSignals stream;
  CHECK(stream.hear(SIGINT, t0) == StopVerdict::first);
  CHECK(stream.hear(SIGINT, t0 + 600ms) == StopVerdict::same);
  CHECK(stream.hear(SIGINT, t0 + 1200ms) == StopVerdict::now);
}

TEST_CASE("a warning never means now; the time limit's SIGTERM after it is the same request",
          "[preempt][stop_signals]") {
  // --signal=B:USR1@40 then, if the job is still running, the time limit.
  StopSignals s;
  CHECK(s.hear(SIGUSR1, t0) == StopVerdict::first);
  CHECK(s.hear(SIGUSR1, t0 + 5s) == StopVerdict::same);
  CHECK(s.hear(SIGTERM, t0 + 40s) == StopVerdict::follows);
  CHECK(s.hear(SIGTERM, t0 + 40s + 8ms) == StopVerdict::same); // slurmd's pair
  CHECK(s.hear(SIGTERM, t0 + 45s) == StopVerdict::now);
  // After an interrupt, a warning changes nothing either.
  StopSignals t;
  CHECK(t.hear(SIGTERM, t0) == StopVerdict::first);
  CHECK(t.hear(SIGUSR2, t0 + 10s) == StopVerdict::same);
}

TEST_CASE("Slurm's time limit is told from SLURM_JOB_END_TIME", "[preempt][stop_signals]") {
  using air::slurm_stop_cause;
  CHECK(slurm_stop_cause(SIGTERM, "1000", 1000) == "time_limit");
  CHECK(slurm_stop_cause(SIGTERM, "1000", 1040) == "time_limit"); // slurmctld's check comes late
  CHECK(slurm_stop_cause(SIGTERM, "1000", 700) == "");            // scancel, a preemption
  CHECK(slurm_stop_cause(SIGUSR1, "1000", 880) == "time_limit_warning");
  CHECK(slurm_stop_cause(SIGTERM, nullptr, 1000) == "");
  CHECK(slurm_stop_cause(SIGTERM, "soon", 1000) == "");
  CHECK(slurm_stop_cause(SIGTERM, "", 1000) == "");
}
