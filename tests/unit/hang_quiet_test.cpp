// The quiet check (core/hang/quiet.hpp): a quiet spell is a hang only when
// the ranks really wait.
#include "core/hang/quiet.hpp"
#include "tests/unit/catch.hpp"

namespace {

air::WorkCounters counters(std::uint64_t ticks, std::uint64_t io) {
  air::WorkCounters w;
  w.readable = true;
  w.cpu_ticks = ticks;
  w.io_bytes = io;
  return w;
}

air::QuietRank rank(int n, bool in_collective, bool working) {
  air::QuietRank r;
  r.rank = n;
  r.in_collective = in_collective;
  r.working = working;
  return r;
}

air::QuietRank exited(int n, bool ok) {
  air::QuietRank r;
  r.rank = n;
  r.running = false;
  r.exited_ok = ok;
  return r;
}

} // namespace

TEST_CASE("a rank works when its CPU time or I/O grows", "[quiet]") {
  // 100 ticks a second over one second: 5 ticks (50 ms of CPU) is work, 4 is a waiting rank's noise.
  CHECK(air::worked(counters(100, 0), counters(105, 0), 1.0, 100));
  CHECK_FALSE(air::worked(counters(100, 0), counters(104, 0), 1.0, 100));
  CHECK(air::worked(counters(100, 0), counters(100, 64 * 1024), 1.0, 100));
  CHECK_FALSE(air::worked(counters(100, 0), counters(100, 4096), 1.0, 100));
  // Counters that went down (a child ended unreaped) or cannot be read are no work.
  CHECK_FALSE(air::worked(counters(100, 0), counters(50, 0), 1.0, 100));
  air::WorkCounters unreadable;
  CHECK_FALSE(air::worked(counters(0, 0), unreadable, 1.0, 100));
  CHECK_FALSE(air::worked(counters(0, 0), counters(100, 0), 0.0, 100));
  // On a GPU only I/O is work: CUDA spins a core while it waits for a collective that never ends.
  CHECK_FALSE(air::worked(counters(100, 0), counters(200, 0), 1.0, 100, false));
  CHECK(air::worked(counters(100, 0), counters(200, 1 << 20), 1.0, 100, false));
}

TEST_CASE("ranks that all wait, or sleep outside a collective, are a hang", "[quiet]") {
  CHECK(air::judge_quiet({rank(0, true, false), rank(1, false, false), rank(2, true, false)}).kind ==
        air::Quiet::hang);
  CHECK(air::judge_quiet({rank(0, true, false), rank(1, true, false)}).kind == air::Quiet::hang);
  // A lone rank that sleeps is stuck too.
  CHECK(air::judge_quiet({rank(0, false, false)}).kind == air::Quiet::hang);
}

TEST_CASE("a rank working in its own code is quiet, even while the others wait for it", "[quiet]") {
  const air::QuietVerdict v =
      air::judge_quiet({rank(0, false, true), rank(1, true, false), rank(2, true, false)});
  CHECK(v.kind == air::Quiet::working);
  CHECK(v.working == std::vector<int>{0});
  // A rank inside a collective never counts as working: NCCL and spinning waits burn CPU.
  CHECK(air::judge_quiet({rank(0, true, true), rank(1, true, true)}).kind == air::Quiet::hang);
}

TEST_CASE("finished ranks make the others' silence nobody's hang, unless one waits in a collective",
          "[quiet]") {
  CHECK(air::judge_quiet({rank(0, false, false), exited(1, true)}).kind == air::Quiet::finished);
  CHECK(air::judge_quiet({rank(0, true, false), exited(1, true)}).kind == air::Quiet::hang);
  // A failed rank is no finished one (its failure ends the run anyway).
  CHECK(air::judge_quiet({rank(0, false, false), exited(1, false)}).kind == air::Quiet::hang);
  CHECK(air::judge_quiet({exited(0, true), exited(1, true)}).kind == air::Quiet::finished);
}
