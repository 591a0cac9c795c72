// Preemption: the ranks that call air.should_stop() stop at one step.
#include "core/run/preemption.hpp"

#include "core/base/duration.hpp"
#include "core/hang/diagnosis.hpp"
#include "core/os/signals.hpp"
#include "core/run/job_preemption.hpp"
#include "core/run/stop_signals.hpp"
#include "core/run/teardown.hpp"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <utility>

namespace air {

std::optional<Preemption::Clock::time_point> Preemption::next_deadline() const {
  if (!pending_) return std::nullopt;
  return pending_->give_up;
}

int Preemption::take_pending() {
  const int first = pending_ ? pending_->signal : 0;
  pending_.reset();
  return first;
}

bool Preemption::echo_of_job_preemption() {
  if (signal_seen_ || out_.status != RunOutcome::Status::preempted || !out_.preemption ||
      !out_.preemption->job_wide)
    return false;
  signal_seen_ = true;
  return true;
}

bool Preemption::begin(int sig, Clock::duration grace, PreemptionReport report) {
  const NodeSteps mine = count_polling_ranks();
  if (mine.polling == 0) return false;
  // The count and the request are not one instant: on a loaded machine the
  // agent can lose the CPU between them while a fast rank steps on and asks
  // should_stop() before its request lands. So the same margin as the job's
  // (the fastest rank's rate over the slack, lead 0). A rank that never
  // counted a step stops at its next question.
  stop_polling_ranks(sig, mine.steps == 0 ? 0 : pick_stop_step({mine}), grace, std::move(report));
  return true;
}

/// This node's running ranks that call air.should_stop(): how many, the
/// furthest one's step count and the fastest one's step rate, read now.
NodeSteps Preemption::count_polling_ranks() {
  progress_.poll(Clock::now());
  NodeSteps mine;
  for (const auto& r : ranks_) {
    if (!r.running() || !progress_.reading(r.index).polls_stop) continue;
    ++mine.polling;
    mine.steps = std::max(mine.steps, progress_.reading(r.index).steps);
    mine.rate = std::max(mine.rate, progress_.rank_rate(r.index));
  }
  return mine;
}

/// Asks this node's polling ranks to stop at `stop_step` (0: at their next
/// should_stop()) within `grace`, signals the others at once, and ends the
/// run as preempted by `sig`. `report` brings what the job decided, if it did.
void Preemption::stop_polling_ranks(int sig, std::uint64_t stop_step, Clock::duration grace,
                                    PreemptionReport report) {
  progress_.poll(Clock::now());
  if (grace < Clock::duration::zero()) grace = Clock::duration::zero();
  report.signal = sig;
  report.stop_step = stop_step;
  report.cause = slurm_stop_cause(sig, std::getenv("SLURM_JOB_END_TIME"), std::time(nullptr));
  report.deadline_s = std::chrono::duration<double>(grace).count();
  const auto deadline = std::chrono::system_clock::now() + grace;
  const std::int64_t deadline_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  exits_.settled();
  pending_.reset();
  teardown_.begin_quietly(grace, Clock::now());
  std::vector<std::string> passed; // ranks already past a step the job chose elsewhere
  for (auto& r : ranks_) {
    if (!r.running() || !progress_.reading(r.index).polls_stop) continue;
    progress_.request_stop(r.index, stop_step, deadline_ns);
    r.asked_to_stop = true;
    report.polling_ranks.push_back(r.plan->rank);
    const std::uint64_t steps = progress_.reading(r.index).steps;
    if (stop_step > 0 && steps >= stop_step)
      passed.push_back("rank " + std::to_string(r.plan->rank) + " is at step " + std::to_string(steps));
  }
  for (auto& r : ranks_) {
    if (!r.running() || r.asked_to_stop || r.teardown_signal != 0) continue;
    r.teardown_signal = sig;
    progress_.mark_tearing_down(r.index); // ours: a shim must not defer it
    signal_group(r.pid, sig);
    report.signalled_ranks.push_back(r.plan->rank);
  }
  const std::string step_words =
      stop_step > 0 ? "step " + std::to_string(stop_step) : std::string("their next should_stop()");
  const std::string where = report.job_wide && report.signal_node >= 0
                                ? " on node " + std::to_string(report.signal_node)
                                : std::string();
  out_.status = RunOutcome::Status::preempted;
  out_.interrupt_signal = sig;
  out_.reason = "preempted by " + signal_name(sig) +
                (report.cause == "time_limit" ? " (Slurm's time limit)" : "") + where + "; " +
                (report.job_wide ? "every node's ranks stop at " : "ranks stop at ") + step_words;
  say_stop(report, where, passed, grace);
  out_.preemption = std::move(report);
}

/// The preemption's lines: which ranks stop where, within what time.
void Preemption::say_stop(const PreemptionReport& report, const std::string& where,
                          const std::vector<std::string>& passed, Clock::duration grace) {
  const int sig = report.signal;
  const std::uint64_t stop_step = report.stop_step;
  if (!console_.options().quiet) {
    std::string lines;
    if (!report.polling_ranks.empty())
      lines += "air-run: " + signal_name(sig) + where + ": asking rank" +
               (report.polling_ranks.size() > 1 ? "s " : " ") + rank_words(report.polling_ranks) +
               " to stop" + (stop_step > 0 ? " at step " + std::to_string(stop_step) : std::string()) +
               (report.job_wide ? " (the job's, from node 0)" : "") + ", up to " +
               format_duration(std::chrono::duration_cast<Millis>(grace)) + "; " + kill_now_hint(sig) + "\n";
    for (const auto& p : passed)
      lines += "air-run: " + p + ", past the job's stop step: it stops at its next should_stop()\n";
    if (!lines.empty()) console_.say(lines, 1 + passed.size());
  }
}

/// Across nodes: a preemption signal here goes to node 0, which picks one
/// stop step for the job (follow_job applies it). Returns false
/// when this node decides alone: one node, or none of its ranks polls.
bool Preemption::ask_job(int sig) {
  if (hooks_ == nullptr || !hooks_->job_wide_preemption()) return false;
  const NodeSteps mine = count_polling_ranks();
  if (mine.polling == 0) return false;
  const auto now = Clock::now();
  signal_seen_ = true;
  pending_ = Pending{sig, now, now + k_preempt_decision_wait};
  tell_(NodeEvent::preempted_by(sig, mine,
                                std::chrono::duration_cast<std::chrono::milliseconds>(plan_.grace_period)));
  if (!console_.options().quiet) {
    const std::string line = "air-run: " + signal_name(sig) +
                             ": agreeing on one stop step with the other nodes (node 0 picks it)\n";
    console_.say(line);
  }
  return true;
}

void Preemption::follow_job(Clock::time_point now) {
  if (!pending_) return;
  if (teardown_.active() || out_.status != RunOutcome::Status::succeeded) {
    pending_.reset(); // the run ends otherwise (a failure here or elsewhere)
    return;
  }
  if (now < pending_->give_up) return;
  const Pending pending = *pending_;
  pending_.reset();
  if (!console_.options().quiet) {
    const std::string line =
        "air-run: node 0 did not pick a stop step within " + format_duration(k_preempt_decision_wait) +
        ": this node's ranks stop at a step of its own, which other nodes may not share\n";
    console_.say(line);
  }
  PreemptionReport report;
  report.fallback = true;
  if (!begin(pending.signal, pending.at + plan_.grace_period - now, std::move(report)))
    interrupt_(pending.signal);
}

/// Node 0's decision, on every node: this node's polling ranks stop at the
/// job's step, within what is left of the grace period of the first signal
/// (of this node's own signal, when that ends sooner).
void Preemption::apply_job_stop(const JobStop& stop) {
  const auto now = Clock::now();
  std::optional<Pending> pending = std::exchange(pending_, std::nullopt);
  if (teardown_.active() || out_.status != RunOutcome::Status::succeeded) return; // ending otherwise already
  Clock::duration grace = stop.grace;
  if (pending) grace = std::min(grace, pending->at + plan_.grace_period - now);
  if (!stop.missing_nodes.empty() && !console_.options().quiet) {
    const std::string line = std::string("air-run: ") +
                             (stop.missing_nodes.size() == 1 ? "node " : "nodes ") +
                             rank_words(stop.missing_nodes) + " sent no step count within " +
                             format_duration(k_preempt_counts_wait) + ": the stop step was picked without " +
                             (stop.missing_nodes.size() == 1 ? "it" : "them") + "\n";
    console_.say(line);
  }
  PreemptionReport report;
  report.job_wide = true;
  report.signal_node = stop.node;
  report.missing_nodes = stop.missing_nodes;
  stop_polling_ranks(stop.signal, stop.stop_step, grace, std::move(report));
}

} // namespace air
