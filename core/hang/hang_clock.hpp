#pragma once

#include <chrono>
#include <optional>

namespace air {

/// The hang watch's clock: when a rank last made progress (a step, a
/// collective, an output byte), and when no progress for --hang-timeout makes a hang to diagnose,
/// once per quiet spell. Pure: the time comes from the caller.
class HangClock {
public:
  using Clock = std::chrono::steady_clock;

  /// `timeout`: --hang-timeout (nullopt: no watch); `start`: when the ranks
  /// start; `startup`: --hang-startup, the least quiet time before the first
  /// sign of progress (starting an interpreter and importing torch alone takes
  /// seconds to tens of seconds on a loaded machine, and a short --hang-timeout
  /// is meant for the training loop, not the start-up).
  HangClock(std::optional<Clock::duration> timeout, Clock::time_point start,
            Clock::duration startup = std::chrono::seconds(60))
      : timeout_(timeout), startup_(startup), last_progress_(start) {}

  /// A rank made a step, a collective or output at `now`: a new spell begins.
  void progress(Clock::time_point now);
  /// A rank worked at `now` (its CPU time or I/O grew, core/hang/quiet.hpp)
  /// without a step, a collective or output: a new spell begins, but the
  /// start-up allowance holds (importing torch is work too).
  void busy(Clock::time_point now) {
    last_progress_ = now;
    diagnosed_ = false;
  }
  /// How long the ranks may be quiet before a hang is diagnosed: --hang-timeout,
  /// with the start-up allowance until the first sign of progress.
  Clock::duration quiet_limit() const;
  /// When the current spell becomes a hang; nullopt without a watch, or once
  /// this spell's diagnosis began.
  std::optional<Clock::time_point> next_deadline() const;
  /// Whether this spell is a hang to diagnose now.
  bool due(Clock::time_point now) const;
  /// This spell's diagnosis begins (not again until the next progress).
  void diagnosing() {
    diagnosed_ = true;
    spell_started_ = last_progress_;
  }
  /// Whether this spell has been diagnosed.
  bool diagnosed() const { return diagnosed_; }
  /// How long the diagnosed spell has lasted at `now`, in seconds (from the
  /// last progress when none was diagnosed yet).
  double quiet_s(Clock::time_point now) const;
  Clock::time_point last_progress() const { return last_progress_; }

private:
  std::optional<Clock::duration> timeout_;
  Clock::duration startup_;
  Clock::time_point last_progress_;
  bool seen_ = false; ///< any rank made a step or printed a line
  bool diagnosed_ = false;
  std::optional<Clock::time_point> spell_started_;
};

} // namespace air
