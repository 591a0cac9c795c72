#pragma once

#include "core/os/process.hpp"
#include "core/os/spawn_request.hpp"

#include <sys/types.h>

#include <csignal>
#include <cstddef>
#include <utility>

namespace air {

/// How ranks are started. `shared`: clone with CLONE_VM, the child on a stack
/// of its own and on air-run's memory until its exec, so nothing of air-run's
/// is copied (no page tables, no copy-on-write faults) and air-run goes on to
/// the next rank while this one execs. `fork`: a plain fork, the way it was
/// done before; used where `shared` is not safe (sanitizer builds, whose
/// runtime the child would share; architectures other than x86-64, where
/// raw_syscall goes through libc and writes errno) and when AIR_RUN_SPAWN=fork
/// asks for it (to compare, or as a way out should a kernel refuse CLONE_VM).
enum class SpawnMethod { fork, shared };

/// The method in force: decided once, from the build and AIR_RUN_SPAWN.
SpawnMethod spawn_method();

/// A stack for one child that shares air-run's memory, with an inaccessible
/// page below it, so an overflow faults in the child instead of writing over
/// air-run's heap. Taken from a pool and given back to it when destroyed
/// (once the child has exec'd or been reaped): no mapping made and unmapped
/// per rank, and no unmap's TLB flush on every CPU. Empty after a move.
class ChildStack {
public:
  ChildStack() = default;
  ~ChildStack();
  ChildStack(ChildStack&& other) noexcept : low_(std::exchange(other.low_, nullptr)) {}
  ChildStack& operator=(ChildStack&& other) noexcept;
  ChildStack(const ChildStack&) = delete;
  ChildStack& operator=(const ChildStack&) = delete;

  /// Takes one; false (errno set) when the pool had none and could map none.
  bool allocate();
  /// The usable part: lowest address and size (the top is aligned for a call).
  void* low() const { return low_; }
  std::size_t usable() const;

private:
  void* low_ = nullptr;
};

/// Every signal blocked in the calling thread while it lives, for a loop that
/// starts many children: start_child in its scope (same thread) leaves the
/// mask alone instead of blocking and restoring it around each birth, two
/// system calls a rank. Signals sent meanwhile wait until it ends.
class SpawnWave {
public:
  SpawnWave();
  ~SpawnWave();
  SpawnWave(const SpawnWave&) = delete;
  SpawnWave& operator=(const SpawnWave&) = delete;

private:
  sigset_t old_{};
  bool outer_ = false; ///< the outermost wave of this thread: it restores the mask
};

/// Starts a child that runs exec_prepared(request), with `method`. With
/// `shared` the child runs on `stack` (allocated here) and reads `request`
/// until it has exec'd: both must stay untouched until then. Every signal is
/// blocked in the calling thread while the child is born (by a SpawnWave, or
/// here), so the child starts with all of them blocked until exec_prepared
/// has reset its actions.
/// With a `cgroup` the child is born in it (clone3's CLONE_INTO_CGROUP), else
/// request.cgroup_procs_fd is set for the child to move itself in. Returns the pid, or -errno (nothing
/// started).
long start_child(SpawnRequest& request, SpawnMethod method, CgroupTarget cgroup, ChildStack& stack);

} // namespace air
