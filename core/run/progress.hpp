#pragma once

#include "core/base/unique_fd.hpp"

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
// Recorder. Every slot is a little-endian 64-bit integer at a fixed offset;
// the shim's Python source uses the same numbers (a unit test checks it).

namespace air {

/// Environment variable that hands a rank its progress file.
inline constexpr std::string_view k_progress_file_var = "AIR_RUN_PROGRESS_FILE";

/// Size of a progress file: one page.
inline constexpr std::size_t k_progress_file_size = 4096;

/// Slot indexes (offset = 8 * index). Written by the rank unless marked.
namespace progress_slot {
inline constexpr int magic = 0;             ///< "AIRPRG01", written by air-run
inline constexpr int steps = 1;             ///< training steps counted
inline constexpr int last_step_ns = 2;      ///< CLOCK_MONOTONIC of the last step
inline constexpr int busy_ns = 3;           ///< time outside collectives, summed over busy_steps
inline constexpr int busy_steps = 4;        ///< steps whose busy time is in busy_ns (all but the first)
inline constexpr int coll_seq = 5;          ///< collectives entered from Python
inline constexpr int coll_entered_ns = 6;   ///< CLOCK_MONOTONIC when the current one began; 0: none
inline constexpr int coll_op = 7;           ///< 1-based index into collective_names() of the current one
inline constexpr int stop_step = 8;         ///< air-run: stop once steps >= this (0: at once)
inline constexpr int stop_requested = 9;    ///< air-run: 1 once the run must stop
inline constexpr int stop_deadline_ns = 10; ///< air-run: CLOCK_REALTIME when SIGKILL comes
inline constexpr int polls_stop = 11;       ///< 1 once the rank called air.should_stop()
inline constexpr int fr_request = 12;       ///< air-run: bumped to ask for a Flight Recorder dump
inline constexpr int fr_done = 13;          ///< the fr_request the rank last answered
inline constexpr int pid = 14;              ///< the rank's pid, written when the shim attached
inline constexpr int fr_armed = 15;         ///< 1 once the rank's Flight Recorder dumper runs
} // namespace progress_slot

/// The torch.distributed functions the shim times, in the order of their
/// coll_op numbers (1-based). Pure.
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
  /// Asks the rank for a Flight Recorder dump; returns the request number.
  std::uint64_t request_flight_recorder();

private:
  std::uint64_t load(int slot) const;
  void store(int slot, std::uint64_t value);
  UniqueFd fd_;
};

} // namespace air
