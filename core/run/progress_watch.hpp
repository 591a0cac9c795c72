#pragma once

#include "core/hang/diagnosis.hpp"
#include "core/run/progress.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace air {

/// The supervisor's view of its ranks' progress pages (core/run/progress.hpp):
/// when any rank last made a step or a collective, each rank's latest counters, the step rate
/// for the live view, and which ranks are stragglers. Reading is a few loads
/// from shared memory per rank, done once per loop iteration; all calls
/// happen on the supervisor's thread.
class ProgressWatch {
public:
  using Clock = std::chrono::steady_clock;

  /// One slot per rank, by the supervisor's rank index.
  explicit ProgressWatch(std::size_t ranks);

  /// Creates rank `index`'s page at `path` before it is spawned; "" on
  /// success, else the error (the rank then runs without step counting).
  std::string create(std::size_t index, const std::string& path);

  /// Reads every mapped page. Returns whether any rank made progress: a
  /// step, or a collective entered or completed.
  bool poll(Clock::time_point now);

  /// The counters read last for rank `index` (all zero when it has no page).
  const ProgressReading& reading(std::size_t index) const { return readings_[index]; }
  /// Whether rank `index` has a page.
  bool mapped(std::size_t index) const { return files_[index].mapped(); }

  /// The median of the ranks' step counts, and its rate per second over the
  /// last few seconds (the live view's); nullopt before any rank counted a
  /// step, and before two readings a few seconds apart.
  std::optional<std::uint64_t> median_steps() const { return median_; }
  std::optional<double> step_rate() const { return rate_; }
  /// Rank `index`'s own steps per second: measured over the last few
  /// seconds, or, before that, from its time per step outside collectives
  /// (an upper bound: a step's wall time also holds its collectives); 0
  /// before its second step. A preemption across nodes needs it to tell how
  /// far a rank gets while the job decides (core/run/job_preemption.hpp).
  double rank_rate(std::size_t index) const;

  /// Asks rank `index` (one that calls air.should_stop()) to stop once it
  /// has made `stop_step` steps, before `deadline_realtime_ns`.
  void request_stop(std::size_t index, std::uint64_t stop_step, std::int64_t deadline_realtime_ns);

  /// Marks rank `index`'s page before air-run signals the rank itself, so
  /// that its shim never defers that signal (ProgressFile::mark_tearing_down).
  void mark_tearing_down(std::size_t index) { files_[index].mark_tearing_down(); }
  /// The same for every rank: a teardown is about to signal them all.
  void mark_all_tearing_down();

  /// Asks every mapped rank for a Flight Recorder dump.
  void request_flight_recorder();
  /// Whether every rank that runs a Flight Recorder dumper has answered the
  /// last request (ranks without one count as answered).
  bool flight_recorder_answered() const;

  /// Judges stragglers from the ranks' counters (`rank_of[i]` is index i's
  /// global rank); returns the lines for ranks named for the first time.
  /// `explain(i)`, when given, is asked once per rank, when it is first
  /// named, for what may explain it (its GPU's readings); the text stays
  /// with the rank for the later judgements, the summary's included.
  std::vector<std::string> name_new_stragglers(const std::vector<int>& rank_of,
                                               const std::function<std::string(std::size_t)>& explain = {});
  /// The last judgement, over every rank that counted steps.
  const std::vector<Straggler>& stragglers() const { return stragglers_; }

  /// The ranks (by index) whose progress file poll() gave up on since the
  /// last call, with why (core/run/progress.hpp): their counts are lost and
  /// read as none from then on. The caller says so.
  std::vector<std::pair<std::size_t, std::string>> take_lost();

private:
  void measure_rank_rate(std::size_t index, Clock::time_point now);
  std::vector<ProgressFile> files_;
  std::vector<std::uint64_t> fr_asked_; ///< the last Flight Recorder request number, per rank
  std::vector<ProgressReading> readings_;
  std::vector<bool> named_;
  std::vector<std::string> explained_; ///< explain()'s text per rank, taken when first named
  std::vector<Straggler> stragglers_;
  /// For the rate: the median step count and when it was read, a few seconds back.
  std::optional<std::pair<Clock::time_point, double>> rate_base_;
  std::optional<double> rate_;
  std::optional<std::uint64_t> median_;
  /// Per rank, as for the median's rate: a base reading and the rate measured from it.
  std::vector<std::optional<std::pair<Clock::time_point, std::uint64_t>>> rank_base_;
  std::vector<double> rank_rate_;
  std::vector<std::pair<std::size_t, std::string>> lost_;
};

} // namespace air
