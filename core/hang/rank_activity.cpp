// Reading the ranks' work counters from /proc.
#include "core/hang/rank_activity.hpp"

#include "core/os/proc_table.hpp"

#include <unistd.h>

#include <unordered_map>

namespace air {

std::vector<WorkCounters> read_work_counters(const std::vector<pid_t>& groups) {
  std::vector<WorkCounters> out(groups.size());
  std::unordered_map<pid_t, std::size_t> slot;
  for (std::size_t i = 0; i < groups.size(); ++i)
    if (groups[i] > 0) slot.emplace(groups[i], i);
  if (slot.empty()) return out;
  for (const ProcEntry& e : read_proc_table()) {
    if (e.zombie) continue;
    const auto at = slot.find(e.pgid);
    if (at == slot.end()) continue;
    WorkCounters& w = out[at->second];
    const auto io = read_proc_io_bytes(e.pid);
    // The rank itself must be readable; a helper that just ended is simply missing.
    if (e.pid == e.pgid) w.readable = true;
    w.cpu_ticks += e.cpu_ticks;
    if (io) w.io_bytes += *io;
  }
  return out;
}

long clock_ticks_per_second() {
  static const long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? ticks : 100;
}

} // namespace air
