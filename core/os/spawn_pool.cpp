// Spare threads for a spawn wave (see spawn_pool.hpp).
#include "core/os/spawn_pool.hpp"

#include "core/os/shared_spawn.hpp"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>

namespace air {

namespace {

/// The most spare threads a wave uses, whatever AIR_RUN_SPAWN_THREADS says.
constexpr std::size_t k_most_spares = 63;
/// The default's bound: see spawn_spares.
constexpr std::size_t k_default_most_spares = 7;

/// Runs the tasks that are left, each i once, whichever thread takes it.
void drain(std::atomic<std::size_t>& next, std::size_t count, const std::function<void(std::size_t)>& task) {
  for (std::size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) task(i);
}

/// The CPUs air-run may run on (its affinity mask), at least 1.
std::size_t usable_cpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
  return static_cast<std::size_t>(std::max(CPU_COUNT(&allowed), 1));
}

} // namespace

/// The pool's threads and the wave they help with. One wave at a time: run()
/// opens it, and closes it before it returns.
struct SpawnPool::State {
  std::mutex mutex;
  std::condition_variable wake;                           ///< a wave opened
  std::condition_variable idle;                           ///< a spare left the wave
  std::size_t threads = 0;                                ///< spares made so far
  std::uint64_t wave = 0;                                 ///< counts the waves opened
  const std::function<void(std::size_t)>* task = nullptr; ///< the open wave's; null when none is open
  std::size_t count = 0;
  std::size_t wanted = 0; ///< how many spares may join it
  std::size_t joined = 0;
  std::size_t active = 0; ///< spares running its tasks now
  std::atomic<std::size_t> next{0};
};

SpawnPool& SpawnPool::get() {
  static SpawnPool* const pool = new SpawnPool; // never destroyed, as its threads never end
  return *pool;
}

void SpawnPool::run(std::size_t count, std::size_t spares, const std::function<void(std::size_t)>& task) {
  spares = count > 0 ? std::min(spares, count - 1) : 0;
  if (spares == 0) {
    for (std::size_t i = 0; i < count; ++i) task(i);
    return;
  }
  if (state_ == nullptr) state_ = new State;
  State& s = *state_;
  {
    // Made with every signal blocked: a thread starts with its maker's mask,
    // so none can take a signal meant for the main thread, even at birth.
    const SpawnWave blocked;
    const std::lock_guard<std::mutex> lock(s.mutex);
    while (s.threads < spares) {
      try {
        std::thread(&SpawnPool::spare, &s).detach();
      } catch (const std::system_error&) {
        break; // out of threads: fewer spares help
      }
      ++s.threads;
    }
    s.task = &task;
    s.count = count;
    s.wanted = std::min(spares, s.threads);
    s.joined = 0;
    s.next = 0;
    ++s.wave;
  }
  s.wake.notify_all();
  drain(s.next, count, task);
  std::unique_lock<std::mutex> lock(s.mutex);
  s.task = nullptr; // a spare that wakes from now on joins nothing
  s.idle.wait(lock, [&s] { return s.active == 0; });
}

void SpawnPool::spare(State* s) {
  // Every signal stays blocked (it was at birth); marking the thread as in a
  // wave also spares start_child the mask's two system calls per birth.
  const SpawnWave blocked;
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(s->mutex);
  for (;;) {
    s->wake.wait(lock, [&] { return s->wave != seen; });
    seen = s->wave;
    if (s->task == nullptr || s->joined >= s->wanted) continue;
    ++s->joined;
    ++s->active;
    const auto* task = s->task;
    const std::size_t count = s->count;
    lock.unlock();
    drain(s->next, count, *task);
    lock.lock();
    if (--s->active == 0) s->idle.notify_all();
  }
}

std::size_t spawn_spares(std::size_t births) {
  if (births <= 1) return 0;
  if (const char* asked = std::getenv("AIR_RUN_SPAWN_THREADS"); asked != nullptr && *asked != '\0') {
    char* end = nullptr;
    const unsigned long n = std::strtoul(asked, &end, 10);
    if (*end == '\0' && asked[0] != '-')
      return std::min({static_cast<std::size_t>(n), k_most_spares, births - 1});
  }
  const std::size_t by_births = (births - 1) / k_births_per_thread;
  return std::min({by_births, usable_cpus() - 1, k_default_most_spares});
}

} // namespace air
