#pragma once

#include "core/hang/quiet.hpp"

#include <sys/types.h>

#include <vector>

namespace air {

/// Reads each rank's work counters (core/hang/quiet.hpp) from /proc: the CPU
/// time and I/O bytes of every live process in the rank's process group (the
/// rank leads its own group, so the tar or uploader it runs counts as its
/// work), summed. One scan of /proc for all the ranks; done only when a quiet
/// spell nears its limit, never on the supervisor's every pass.
std::vector<WorkCounters> read_work_counters(const std::vector<pid_t>& groups);

/// The clock tick rate that WorkCounters::cpu_ticks is counted in.
long clock_ticks_per_second();

} // namespace air
