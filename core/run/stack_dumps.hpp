#pragma once

#include "core/run/console.hpp"
#include "core/run/rank_table.hpp"

#include <chrono>
#include <optional>
#include <string_view>
#include <vector>

namespace air {

/// Whether a faulthandler dump that ends in `tail` (its last bytes) is whole
/// by its look: its last line is the main thread's outermost frame, a script's
/// `<module>` or runpy's `_run_module_as_main` for `python -m`. faulthandler
/// lists the main thread last, so nothing follows that line. A dump that ends
/// elsewhere (a main thread in interpreter shutdown, a stack cut at 100 frames)
/// is taken once it ends a line and stops growing for a while (StackDumps).
bool stack_dump_ends_main_thread(std::string_view tail);

/// Why stacks are being taken: shown on demand (Ctrl-\), before a timeout's
/// teardown, or for a hang's diagnosis.
enum class StackPurpose { show, timeout, hang };

/// Stack dumps: asks the armed Python ranks for their stacks (the stack
/// signal, core/run/stacks.hpp), waits for the files to stop growing, and
/// reads what each rank wrote.
class StackDumps {
public:
  using Clock = std::chrono::steady_clock;

  /// `stack_signal`: the signal the ranks armed (LaunchPlan::stack_signal; 0: none).
  StackDumps(RankTable& ranks, int stack_signal)
      : ranks_(ranks), signal_(stack_signal), asks_(ranks.size()) {}

  /// Sends the stack signal to every running rank whose handler is
  /// installed now (its SigCgt mask says so: never one that exec'd another
  /// program since it armed, which the signal would kill). Returns
  /// whether any was asked; the loop then waits for the dumps.
  bool request(StackPurpose purpose, Clock::time_point now);
  /// Whether dumps are awaited.
  bool waiting() const { return deadline_.has_value(); }
  /// What the awaited dumps are for.
  StackPurpose purpose() const { return purpose_; }
  /// When to look at the files again; nullopt when none is awaited.
  std::optional<Clock::time_point> next_deadline(Clock::time_point now) const;
  /// Whether waiting is over: the deadline passed, or every asked rank's
  /// dump has arrived (and, for a hang, `flight_recorder_answered`).
  bool due(Clock::time_point now, bool flight_recorder_answered);
  /// Removes every rank's stack file before a new attempt's ranks start:
  /// a rank arms by creating it, so none left from the attempt before may
  /// pass for armed.
  void clear_files() const;
  /// Ends the wait and reads the dumps: into `out` for a timeout or a hang;
  /// for Ctrl-\ the lines to show.
  ConsoleBatch collect(RunOutcome& out, Clock::time_point now);

private:
  /// One rank's dump: the size of its stack file when the signal went out
  /// (-1: not asked), at the previous check, and since when it has had that size.
  struct Ask {
    long long offset = -1;
    long long seen = -1;
    Clock::time_point seen_since{};
  };
  bool arrived(Clock::time_point now);

  RankTable& ranks_;
  int signal_;
  std::vector<Ask> asks_;
  std::optional<Clock::time_point> deadline_; ///< when to stop waiting; set while waiting
  StackPurpose purpose_ = StackPurpose::show;
};

} // namespace air
