// Whether a quiet spell is a hang: ranks that really wait.
#include "core/hang/quiet.hpp"

#include <algorithm>

namespace air {

namespace {

/// A working rank's CPU time grows by at least this fraction of the wall time.
constexpr double k_min_cpu_share = 0.05;
/// Or it reads or writes at least this many bytes between two readings.
constexpr std::uint64_t k_min_io_bytes = 64 * 1024;

} // namespace

bool worked(const WorkCounters& before, const WorkCounters& after, double elapsed_s, long ticks_per_s,
            bool cpu_counts) {
  if (!before.readable || !after.readable || elapsed_s <= 0 || ticks_per_s <= 0) return false;
  // Counters of a process group go down when a child exits unreaped: no growth then.
  const std::uint64_t cpu = after.cpu_ticks > before.cpu_ticks ? after.cpu_ticks - before.cpu_ticks : 0;
  const std::uint64_t io = after.io_bytes > before.io_bytes ? after.io_bytes - before.io_bytes : 0;
  const double cpu_s = static_cast<double>(cpu) / static_cast<double>(ticks_per_s);
  return (cpu_counts && cpu_s >= k_min_cpu_share * elapsed_s) || io >= k_min_io_bytes;
}

QuietVerdict judge_quiet(const std::vector<QuietRank>& ranks) {
  QuietVerdict v;
  bool any_running = false, any_waiting = false, any_finished = false;
  for (const QuietRank& r : ranks) {
    if (!r.running) {
      any_finished = any_finished || r.exited_ok;
      continue;
    }
    any_running = true;
    if (r.in_collective)
      any_waiting = true;
    else if (r.working)
      v.working.push_back(r.rank);
  }
  if (!v.working.empty()) {
    v.kind = Quiet::working;
  } else if (!any_running || (any_finished && !any_waiting)) {
    v.kind = Quiet::finished;
  }
  return v;
}

} // namespace air
