#pragma once

#include "core/base/unique_fd.hpp"
#include "core/run/progress_slots.hpp"

#include <cstdint>
#include <string>
#include <string_view>

// Progress of a Python rank, shared with air-run through one page of memory.
//
// A hung job and a slow rank look the same from outside: nothing on the
// console. To say which rank holds everyone up, air-run needs to know, while
// the run is alive, how many training steps each rank has made and whether it
// is inside a collective. The rank's sitecustomize shim (core/run/stacks.hpp)
// maps a per-rank file that air-run created and counts there, with no change
// to user code: optimizer steps (PyTorch's global step hook, or a wrapped
// Optimizer.step on torch 1.x), `air.step()`, and every torch.distributed
// collective called from Python (entered, left, time inside). A count is one
// store into the mapping: no system call, no lock, a few hundred nanoseconds.
//
// The same page carries air-run's requests back to the rank: stop at an
// agreed step (preemption, `air.should_stop()`) and dump PyTorch's Flight
// Recorder. Every slot is a little-endian 64-bit integer at a fixed offset.
// The layout has one source, core/run/progress_slots.def, from which the
// build generates core/run/progress_slots.hpp (air::progress_slot::NAME,
// k_progress_file_size, k_collective_names) and the shim's Python constants.

namespace air {

/// Environment variable that hands a rank its progress file.
inline constexpr std::string_view k_progress_file_var = "AIR_RUN_PROGRESS_FILE";

/// The torch.distributed function the shim times as coll_op `op` (1-based,
/// k_collective_names), or "a collective" for any other number. Pure.
std::string_view collective_name(std::uint64_t op);

/// One rank's counters as read from its progress file at one moment.
struct ProgressReading {
  bool attached = false; ///< the shim mapped the file (pid slot set)
  std::uint64_t steps = 0;
  std::int64_t last_step_ns = 0;
  std::uint64_t busy_ns = 0;
  std::uint64_t busy_steps = 0;
  std::uint64_t coll_seq = 0;
  std::int64_t coll_entered_ns = 0; ///< 0: not inside a collective
  std::uint64_t coll_op = 0;
  bool polls_stop = false;
  std::uint64_t fr_done = 0;
  bool fr_armed = false;
  /// Non-empty when the page cannot be trusted (the rank truncated or
  /// scribbled over it): why; every count above is then zero.
  std::string lost;
};

/// A progress file created by air-run for one rank: read at every tick of
/// the supervisor, written for stop and dump requests. The rank maps it;
/// air-run only reads and writes it through its descriptor, so nothing the
/// rank does to the file (truncate it, scribble over it) can fault air-run:
/// read() then says the counts are lost. Move-only; closes on destruction
/// (the file stays for the rank).
class ProgressFile {
public:
  /// Creates (or empties) `path`, sizes it to one page and writes the
  /// magic. Returns "" on success, else the error ("open /x: ...").
  std::string create(const std::string& path);

  /// Whether the file is open (created, and not given up as lost).
  bool mapped() const { return static_cast<bool>(fd_); }
  /// Stops reading the file: its counts are lost.
  void close() { fd_.reset(); }
  ProgressReading read() const;
  /// Asks the rank to stop once its step count reaches `stop_step`.
  void request_stop(std::uint64_t stop_step, std::int64_t deadline_realtime_ns);
  /// Says that air-run is about to signal the rank itself (a teardown):
  /// the rank's shim then lets that SIGTERM through instead of deferring it
  /// to a stop step (core/run/python/air_run_progress.py, _AirRunSigterm).
  void mark_tearing_down();
  /// Asks the rank for a Flight Recorder dump; returns the request number.
  std::uint64_t request_flight_recorder();

private:
  std::uint64_t load(int slot) const;
  void store(int slot, std::uint64_t value);
  UniqueFd fd_;
};

} // namespace air
