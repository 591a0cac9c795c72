#pragma once

#include "core/run/rank_table.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace air {

class Containment;
class StdinRelay;

/// Exits: reaps the ranks as they end, records how each ended, and judges
/// the run's root cause. A rank that only lost its peer is a provisional
/// cause: the teardown waits a moment (the settle deadline) for the rank
/// that caused it.
class Exits {
public:
  using Clock = std::chrono::steady_clock;

  Exits(RankTable& ranks, RunOutcome& out) : ranks_(ranks), out_(out) {}

  /// Reads the OOM killer's count before the ranks start: a later rise
  /// means a rank killed by SIGKILL was the OOM killer's.
  void read_oom_baseline();
  /// Counts the run cgroup's OOM kills instead, where it has a memory.events
  /// (only the run's processes, not the rest of air-run's cgroup).
  void watch_run_cgroup(const std::string& run_cgroup_dir);
  /// Reaps every rank that has exited and records its end; returns them, in
  /// the order they were reaped, to be judged once all are in (a rank that
  /// ended on its own in the same pass as the root cause must not be marked
  /// stopped_by_air_run). `containment` (may be null) learns of its
  /// watchdog's end; `stdin` stops when its rank ends.
  std::vector<RankState*> reap(Containment* containment, StdinRelay& stdin);
  /// Records that `r` never ran (its program is missing or not executable)
  /// as a rank that exited with the shell's `code`.
  void never_ran(RankState& r, int code, const std::string& error);
  /// Why the rank that ended as `o` failed, for the outcome's reason: the
  /// exception its `error_file` records ("rank 1 failed: RuntimeError: boom
  /// (train.py:27)"), else how it ended ("rank 3 exited with exit code 1");
  /// marks it killed by the OOM killer when that is so.
  std::string failure_reason(RankOutcome& o, const std::string& error_file) const;

  /// Records a rank's failure as the run's root cause unless one was found
  /// already (a provisional lost peer is replaced by a real cause). Returns
  /// whether the teardown begins now: false when this failure is no news,
  /// or is a lost peer whose cause the settle deadline waits for.
  bool fail(const RankState& r, std::string reason, bool lost_peer, Clock::time_point now);
  /// Whether the root cause is still provisional (a lost peer).
  bool settling() const { return settle_deadline_.has_value(); }
  std::optional<Clock::time_point> settle_deadline() const { return settle_deadline_; }
  /// Whether the wait for the lost peer's cause is over: its deadline has
  /// passed, or every rank has ended and no other node may tell the cause
  /// (`others_may_tell`: SupervisorHooks::others_may_tell).
  bool settle_due(Clock::time_point now, bool others_may_tell = false) const;
  /// The teardown began: the provisional cause is final.
  void settled() { settle_deadline_.reset(); }

private:
  bool reap_one(RankState& r, std::vector<RankState*>& ended, StdinRelay& stdin);

  RankTable& ranks_;
  RunOutcome& out_;
  /// New OOM kills since the baseline, which the caller then owns: the
  /// first failing rank they are attributed to takes them.
  std::uint64_t take_oom_kills() const;

  /// Moves on as kills are attributed (failure_reason is const otherwise).
  mutable std::optional<std::uint64_t> oom_baseline_;
  std::string oom_cgroup_dir_;
  std::uint64_t end_counter_ = 0;
  std::optional<Clock::time_point> settle_deadline_;
};

} // namespace air
