#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// Which rank holds everyone up, and where: the pure half of hang and
// straggler diagnosis. The supervisor gathers each rank's progress page
// (core/run/progress.hpp) and Python stack (core/run/stacks.hpp); these
// functions turn them into the sentence and the lists that the console and
// the reports show, so they are tested without processes.

namespace air {

/// The innermost frame of a rank's main thread that is the user's code, from
/// a faulthandler dump: "stuck_here at train.py:12". Frames of the standard
/// library, of site-packages (torch), of the air package (air.data...) and of
/// air's own shim are passed over.
/// "" when the dump has no such frame. Pure.
std::string user_place(std::string_view faulthandler_dump);

/// One rank as the hang diagnosis sees it.
struct HangRank {
  int rank = 0;
  int node = -1;                    ///< its node, in a job-wide diagnosis across nodes; -1 on one node
  bool running = true;              ///< not yet exited
  bool counted = false;             ///< its shim attached to the progress page
  bool in_collective = false;       ///< inside a torch.distributed collective
  std::string collective;           ///< its name, when in_collective
  std::uint64_t collective_seq = 0; ///< the collectives it entered (the current one included)
  double waiting_s = 0;             ///< how long it has been inside the current one
  std::string since;                ///< wall-clock "12:01:03" when it entered it
  std::string place;                ///< user_place of its stack ("" when unknown)
  std::uint64_t steps = 0;
  /// Measured by its own node (core/hang/quiet.hpp): it worked over the
  /// latest window (CPU or I/O) or wrote output within the hang timeout, so
  /// it is not quiet; node 0 judges the job's quiet from every node's ranks.
  bool working = false;
  bool exited_ok = false; ///< it exited with status 0
  /// From its Flight Recorder dump (NCCL, core/hang/flight_recorder.hpp): the
  /// last collective it enqueued in the default group, its name and state.
  std::optional<std::uint64_t> nccl_enqueued;
  std::string nccl_op;
  std::string nccl_state;
};

/// The diagnosis of a hang: who is behind, and the one line that says it.
struct HangDiagnosis {
  std::vector<int> laggards; ///< ranks the others wait for; empty when it cannot tell
  std::string line;          ///< "rank 1 is in stuck_here at train.py:12; ranks 0 and 2 wait in ..."
};

/// Names the laggards: ranks outside any collective while others wait in
/// one, or ranks behind in the collective sequence while the others wait in
/// a later one of the same kind. Ranks that all wait, in different
/// collectives, called mismatched ones (a collective only some ranks call):
/// the line says so, "ranks wait in different collectives: rank 0 in
/// broadcast_object_list #4 at ...; ranks 1 and 2 in barrier #4 at ...", and
/// names no laggard; failing both (NCCL collectives return at once, so Python sees
/// none), ranks whose Flight Recorder shows fewer collectives enqueued than
/// the others'. Otherwise no rank is singled out and the line gives every
/// rank's place. Pure.
HangDiagnosis diagnose_hang(const std::vector<HangRank>& ranks);

/// One rank's step statistics for straggler detection: time outside
/// collectives per step, averaged over `steps` steps.
struct StepStats {
  int rank = 0;
  std::uint64_t steps = 0;   ///< steps whose busy time is in busy_ns
  std::uint64_t busy_ns = 0; ///< time outside collectives over those steps
};

/// A rank consistently slower than the others.
struct Straggler {
  int rank = 0;
  double busy_ms = 0;   ///< its time outside collectives per step
  double others_ms = 0; ///< the other ranks' median of the same
  double slower_ms = 0; ///< busy_ms - others_ms
  std::string gpu;      ///< NVML readings that may explain it ("" on CPU)
};

/// Thresholds that keep noise from naming a straggler.
struct StragglerRule {
  std::uint64_t min_steps = 10;  ///< every rank needs this many measured steps
  double min_slower_ms = 10;     ///< at least this much slower per step ...
  double min_slower_ratio = 0.2; ///< ... and this fraction of the others' time per step
};

/// Ranks whose time outside collectives per step exceeds the median of the
/// other ranks' by both of the rule's margins; in synchronous training the
/// others spend that difference waiting for them inside the collectives.
/// Needs two ranks with `min_steps` each; else none. Pure.
std::vector<Straggler> find_stragglers(const std::vector<StepStats>& ranks, const StragglerRule& rule = {});

/// "rank 1 is a straggler: 82 ms a step outside collectives, the others 2 ms". Pure.
std::string straggler_line(const Straggler& s);

/// "0 and 2", "0, 2 and 3": a list of ranks as a sentence says it. Pure.
std::string rank_words(const std::vector<int>& ranks);

} // namespace air
