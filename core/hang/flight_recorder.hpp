#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

// PyTorch's Flight Recorder, read back. An NCCL collective returns before the
// GPU has run it, so a hung rank's Python stack often shows no collective at
// all; the Flight Recorder (kept by each rank when TORCH_FR_BUFFER_SIZE is
// set, dumped as JSON on air-run's request, core/run/progress.hpp) holds
// NCCL's own sequence: which collectives each rank enqueued, started and
// completed. Comparing the ranks' last enqueued collective says who is behind.

namespace air {

/// What one rank's dump says about its default process group.
struct FlightRecorderState {
  std::uint64_t last_enqueued = 0;  ///< collective_seq_id of the last collective it enqueued
  std::uint64_t last_completed = 0; ///< ... that completed
  std::string last_op;              ///< that entry's profiling name, "nccl:all_reduce"
  std::string last_state;           ///< "scheduled", "started" or "completed"
};

/// Reads a dump written by `_dump_nccl_trace_json` (torch 2.x): the entries
/// of process group 0 (the default group), the latest by collective_seq_id.
/// nullopt when the text is not such a dump or holds no entry. Pure.
std::optional<FlightRecorderState> parse_flight_recorder(std::string_view json_text);

} // namespace air
