#pragma once

#include "core/run/console.hpp"
#include "core/run/exits.hpp"
#include "core/run/job_events.hpp"
#include "core/run/progress_watch.hpp"
#include "core/run/rank_table.hpp"
#include "core/run/supervisor.hpp"
#include "core/run/teardown.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace air {

/// Preemption: a preemption signal (SIGTERM from a scheduler or a spot
/// notice, SIGUSR1/2 from Slurm --signal) while some ranks call
/// air.should_stop(). Instead of stopping them mid-step, air-run picks one
/// step that no rank has passed and asks each of them to stop there, saving
/// what it must within the grace period; ranks that never ask get the
/// signal at once. Across nodes (SupervisorHooks::job_wide_preemption) node 0
/// picks one step for the job, and this node's own step is the fallback
/// when node 0 does not answer.
class Preemption {
public:
  using Clock = std::chrono::steady_clock;
  /// Ends the run as an interruption by the signal (when no rank polls after all).
  using Interrupt = std::function<void(int sig)>;
  /// Sends an event to the job (SupervisorHooks::tell, through the supervisor).
  using Tell = std::function<void(const NodeEvent&)>;

  /// `hooks` (may be null) says whether node 0 decides (job_wide_preemption);
  /// `tell` takes this node's news for the job.
  Preemption(const LaunchPlan& plan, RankTable& ranks, RunOutcome& out, Console& console,
             ProgressWatch& progress, Teardown& teardown, Exits& exits, const SupervisorHooks* hooks,
             Tell tell, Interrupt interrupt)
      : plan_(plan), ranks_(ranks), out_(out), console_(console), progress_(progress), teardown_(teardown),
        exits_(exits), hooks_(hooks), tell_(std::move(tell)), interrupt_(std::move(interrupt)) {}

  /// Whether a signal went to node 0, which has yet to pick the job's step.
  bool pending() const { return pending_.has_value(); }
  /// When this node stops on its own step if node 0 has not answered.
  std::optional<Clock::time_point> next_deadline() const;
  /// Stops the ranks at one step of this node's own for `sig`, within
  /// `grace`; false when no running rank polls (the usual teardown follows).
  bool begin(int sig, Clock::duration grace, PreemptionReport report = {});
  /// Across nodes: sends `sig` to node 0, which picks the job's step
  /// (follow_job applies it); false when this node decides alone (one node,
  /// or none of its ranks polls).
  bool ask_job(int sig);
  /// A second signal while node 0 decides: the first one's signal, no longer pending.
  int take_pending();
  /// Whether a preemption signal is this node's own copy of the signal the
  /// job already stops for (node 0's stop may come before this node reads its
  /// own signal): its first, not a second one that means "now". Once only.
  bool echo_of_job_preemption();
  /// Every pass, across nodes, once the job's events are acted on (its stop
  /// step among them): falls back to this node's own step when node 0
  /// stays silent past k_preempt_decision_wait.
  void follow_job(Clock::time_point now);
  /// This node's running ranks that call air.should_stop(): how many, the
  /// furthest one's step count and the fastest one's step rate, read now
  /// (what node 0 asks for with JobEvent::counts_asked).
  NodeSteps count_polling_ranks();
  /// Node 0's decision (JobEvent::stop), on every node: this node's polling
  /// ranks stop at the job's step, within what is left of the grace period
  /// of the first signal (of this node's own signal, when that ends sooner).
  void apply_job_stop(const JobStop& stop);

private:
  void stop_polling_ranks(int sig, std::uint64_t stop_step, Clock::duration grace, PreemptionReport report);
  void say_stop(const PreemptionReport& report, const std::string& where,
                const std::vector<std::string>& passed, Clock::duration grace);

  const LaunchPlan& plan_;
  RankTable& ranks_;
  RunOutcome& out_;
  Console& console_;
  ProgressWatch& progress_;
  Teardown& teardown_;
  Exits& exits_;
  const SupervisorHooks* hooks_;
  Tell tell_;
  Interrupt interrupt_;
  /// A signal that went to node 0 while it picks the job's stop step: the
  /// signal, when it came, and when this node stops on its own step.
  struct Pending {
    int signal = 0;
    Clock::time_point at{};
    Clock::time_point give_up{};
  };
  std::optional<Pending> pending_;
  /// This node's own preemption signal has been seen (it asked node 0, or
  /// the job's stop came first and the signal after it): the next one is a
  /// second signal, which kills at once.
  bool signal_seen_ = false;
};

} // namespace air
