#pragma once

#include "core/hang/hang_clock.hpp"
#include "core/hang/quiet.hpp"
#include "core/run/console.hpp"
#include "core/run/job_events.hpp"
#include "core/run/progress_watch.hpp"
#include "core/run/rank_table.hpp"
#include "core/run/stack_dumps.hpp"
#include "core/run/supervisor.hpp"
#include "core/run/teardown.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace air {

/// The hang watch: once the ranks made no progress for --hang-timeout
/// (HangClock) and really wait (no rank outside a collective works on, and
/// no finished rank leaves the others' silence nobody's hang:
/// core/hang/quiet.hpp), asks them for their stacks and Flight Recorder traces, names
/// the laggards from each one's place in its collectives, prints the
/// diagnosis and records it; with --on-hang stop, ends the run. Across
/// nodes (SupervisorHooks::job_wide_hangs) node 0 names the job's laggards
/// from every node's places and decides.
class HangWatch {
public:
  using Clock = std::chrono::steady_clock;
  /// Ends the run (the teardown's first signal), called once the run is hung.
  using Stop = std::function<void()>;
  /// Sends an event to the job (SupervisorHooks::tell, through the supervisor).
  using Tell = std::function<void(const NodeEvent&)>;

  /// `hooks` (may be null) says whether node 0 decides (job_wide_hangs);
  /// `tell` takes this node's news for the job.
  HangWatch(const LaunchPlan& plan, RankTable& ranks, RunOutcome& out, Console& console,
            ProgressWatch& progress, StackDumps& stacks, const Teardown& teardown,
            const SupervisorHooks* hooks, Tell tell, Stop stop, Clock::time_point start);

  /// The quiet spells' clock, which the ranks' lines and steps reset.
  HangClock& clock() { return clock_; }
  /// When the watch must look again: the spell's end, node 0's verdict's.
  std::optional<Clock::time_point> next_deadline(bool tearing_down) const;
  /// Each pass, after the exits: a quiet spell past its limit begins a
  /// diagnosis; node 0's verdict that never came ends this node's run.
  void tick(Clock::time_point now);
  /// Across nodes (JobEvent::places_asked): answers node 0's question for
  /// this node's places, from the diagnosis of this quiet spell, or a new one.
  void answer_places_asked();
  /// Node 0, across nodes (JobEvent::places): the nodes' places are in;
  /// names the job's laggards with the same rules, prints the job's
  /// diagnosis and records it (laggards as global ranks); with --on-hang
  /// stop, ends the run, and with it the job.
  void finish_job(JobPlaces job);
  /// Across nodes (JobEvent::not_hung): node 0 found the job's quiet spell
  /// no hang (a rank of some node works, or ranks finished while none
  /// waits); this node's diagnosis of it is withdrawn and, unless progress
  /// came meanwhile, a new spell begins.
  void job_not_hung();
  /// The stack dumps asked for the diagnosis are in (or their wait is over).
  void stacks_in() { finish(); }

private:
  /// How long before the spell's limit the work counters are read.
  Clock::duration work_window() const;
  /// Whether the work counters were read for the current quiet spell.
  bool counters_fresh() const;
  /// When the quiet check must look next: a window before the spell's
  /// limit to read the counters, then the limit (at least a window later).
  std::optional<Clock::time_point> quiet_deadline() const;
  /// The spell reached its limit: whether the ranks really wait.
  Quiet judge_quiet_spell(Clock::time_point now);
  void begin();
  void finish();
  /// Ends the work window that node 0's question began (working_).
  void measure_asked(Clock::time_point now);
  /// The job's quiet was no hang: a new spell, the diagnosis withdrawn.
  void not_hung(Clock::time_point now);
  HangReport local_report(Clock::time_point now);
  void conclude(HangReport report, const std::string& lead);

  const LaunchPlan& plan_;
  RankTable& ranks_;
  RunOutcome& out_;
  Console& console_;
  ProgressWatch& progress_;
  StackDumps& stacks_;
  const Teardown& teardown_;
  const SupervisorHooks* hooks_;
  Tell tell_;
  Stop stop_;
  HangClock clock_;
  /// The ranks' work counters, read a window before the spell's limit, when,
  /// and the spell they belong to (its last progress).
  std::vector<WorkCounters> counters_;
  std::optional<Clock::time_point> counters_at_;
  Clock::time_point counters_spell_{};
  /// Across nodes: this node's ranks' places from its latest diagnosis, sent
  /// to node 0; whether that diagnosis was node 0's question rather than
  /// this node's quiet; and, with --on-hang stop, when this node stops on
  /// its own if node 0 never decides.
  std::vector<HangRank> local_places_;
  bool asked_ = false;
  std::optional<Clock::time_point> verdict_deadline_;
  /// Across nodes: which ranks (by index) worked over the latest window,
  /// this node's own quiet check's or the one node 0's question began
  /// (its first counters, when, whether it runs, and whether the stacks are
  /// in and only the window's end is awaited); and the summary's hang from
  /// before this spell's diagnosis, kept if the job finds the spell no hang.
  std::vector<bool> working_;
  std::vector<WorkCounters> asked_counters_;
  Clock::time_point asked_at_{};
  bool measuring_ = false;
  bool places_ready_ = false;
  std::optional<HangReport> hang_before_;
  bool withdrawable_ = false; ///< a diagnosis began that no verdict has settled yet
};

} // namespace air
