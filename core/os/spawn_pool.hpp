#pragma once

#include <cstddef>
#include <functional>

namespace air {

/// Spare threads for a spawn wave: one thread makes a rank's pipes and clones
/// it in about 40 us, so 128 ranks started from one thread take 5 ms on a
/// host whose CPUs could start them side by side.
///
/// The threads are made on first use and live until air-run exits, parked
/// between waves. They must never end before the children they made: a
/// child's parent-death signal (PR_SET_PDEATHSIG, which a rank sets before
/// its exec so that it dies with air-run) fires when the thread that made it
/// ends, not the process. Every signal is blocked in them, so a signal sent
/// to air-run is taken by its main thread only.
class SpawnPool {
public:
  /// The pool of this process.
  static SpawnPool& get();

  /// Runs `task(i)` for every i in [0, count): on the calling thread and on
  /// up to `spares` of the pool's threads, each taking the next i in turn
  /// (so the tasks start in about their order). Returns when all are done.
  /// With `spares` 0 or one task, the calling thread runs them all.
  void run(std::size_t count, std::size_t spares, const std::function<void(std::size_t)>& task);

  SpawnPool(const SpawnPool&) = delete;
  SpawnPool& operator=(const SpawnPool&) = delete;

private:
  SpawnPool() = default;
  struct State;
  /// A spare's life: parked until a wave opens, then helping with it.
  static void spare(State* s);
  State* state_ = nullptr; ///< never freed: a parked thread may still look at it during exit
};

/// How many spare threads a wave of `births` fresh ranks uses:
/// AIR_RUN_SPAWN_THREADS when set (0: the main thread alone), else one per
/// k_births_per_thread ranks beyond the first, at most one less than the CPUs
/// air-run may run on and at most 7 (the births share the kernel's locks on
/// air-run's memory and its file table: past that, more threads add little).
std::size_t spawn_spares(std::size_t births);

/// Fresh ranks per spare thread: fewer, and waking the thread costs more than
/// it saves.
inline constexpr std::size_t k_births_per_thread = 4;

} // namespace air
