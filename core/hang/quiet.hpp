#pragma once

#include <cstdint>
#include <vector>

// When no rank made progress (a step, a collective, an output byte) for
// --hang-timeout, is that a hang? Only if the ranks really wait. A rank alone
// in its own code that keeps working (a checkpoint save on rank 0 while the
// others wait at a barrier, an upload, an evaluation without collectives)
// is quiet, not hung: its CPU time or its I/O counters grow. And once some
// ranks finished (exited 0), the others' silence outside any collective is
// nobody's hang: nobody waits for anyone. Pure: the readings come from the
// caller (core/hang/rank_activity.hpp).

namespace air {

/// A rank's work counters at one moment: its process group's CPU time in
/// clock ticks and the bytes it read and wrote.
struct WorkCounters {
  bool readable = false; ///< false: the rank's /proc entries could not be read
  std::uint64_t cpu_ticks = 0;
  std::uint64_t io_bytes = 0;
};

/// Whether a rank worked between two readings `elapsed_s` seconds apart:
/// its CPU time grew by at least 5 % of that time (a rank that waits in a
/// collective, or sleeps, uses next to none; its helper threads a tick now
/// and then), or it read or wrote at least 64 KiB. `ticks_per_s`: the clock
/// tick rate (sysconf(_SC_CLK_TCK)). Without `cpu_counts` (a rank on a GPU)
/// only the I/O counts: CUDA spins on the CPU while it waits for the GPU, so
/// a rank stuck in a synchronize behind an NCCL collective that never ends
/// burns a core as it waits. Pure.
bool worked(const WorkCounters& before, const WorkCounters& after, double elapsed_s, long ticks_per_s,
            bool cpu_counts = true);

/// One rank as the quiet check sees it.
struct QuietRank {
  int rank = 0;
  bool running = true;        ///< not yet exited
  bool exited_ok = false;     ///< exited with status 0
  bool in_collective = false; ///< its progress page says it waits in a collective
  bool working = false;       ///< worked() over the last readings
};

/// What a quiet spell is.
enum class Quiet {
  hang,     ///< the ranks really wait: diagnose it
  working,  ///< a rank outside any collective is working: not a hang
  finished, ///< some ranks finished and no running rank waits in a collective
};

/// The verdict over every rank, with the working ranks (by rank) when
/// `working`. A rank inside a collective never counts as working, whatever
/// its CPU does (NCCL and spinning waits burn CPU while they wait). Pure.
struct QuietVerdict {
  Quiet kind = Quiet::hang;
  std::vector<int> working;
};
QuietVerdict judge_quiet(const std::vector<QuietRank>& ranks);

} // namespace air
