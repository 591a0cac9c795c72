#include "core/run/outcome.hpp"

#include <algorithm>
#include <csignal>

namespace air {

namespace {

/// The run statuses' two spellings, one row each.
struct StatusSpelling {
  RunOutcome::Status status;
  std::string_view name;  ///< machine-readable
  std::string_view words; ///< for the human report
};
constexpr StatusSpelling k_status_spellings[] = {
    {RunOutcome::Status::succeeded, "succeeded", "succeeded"},
    {RunOutcome::Status::failed, "failed", "failed"},
    {RunOutcome::Status::timed_out, "timed_out", "timed out"},
    {RunOutcome::Status::interrupted, "interrupted", "was interrupted"},
    {RunOutcome::Status::launch_failed, "launch_failed", "could not be launched"},
    {RunOutcome::Status::hung, "hung", "hung"},
    {RunOutcome::Status::preempted, "preempted", "was preempted"},
};

const StatusSpelling& spelling_of(RunOutcome::Status status) {
  for (const auto& row : k_status_spellings)
    if (row.status == status) return row;
  return k_status_spellings[1];
}

} // namespace

std::string_view to_string(RunOutcome::Status status) { return spelling_of(status).name; }

std::string_view status_words(RunOutcome::Status status) { return spelling_of(status).words; }

int RunOutcome::exit_code() const {
  switch (status) {
  case Status::succeeded:
    return 0;
  case Status::failed:
    if (remote_failure) return remote_failure->exit_code;
    for (const auto& r : ranks)
      if (r.rank == root_cause_rank) return r.status.shell_code();
    return 1;
  case Status::timed_out:
  case Status::hung:
    return 124;
  case Status::interrupted:
  case Status::preempted:
    return 128 + interrupt_signal;
  case Status::launch_failed:
    return 125;
  }
  return 1;
}

bool ended_by_teardown_signal(const ExitStatus& status, int sent_signal) {
  if (sent_signal <= 0) return false;
  const auto is_ours = [sent_signal](int sig) { return sig == sent_signal || sig == SIGKILL; };
  switch (status.kind) {
  case ExitStatus::Kind::signaled:
    return is_ours(status.signal);
  case ExitStatus::Kind::exited:
    return status.code == 0 || (status.code > 128 && is_ours(status.code - 128));
  case ExitStatus::Kind::not_exited:
    return true; // reaped elsewhere: nothing says otherwise
  }
  return false;
}

bool stopped_at_stop_step(const RankOutcome& r, std::uint64_t stop_step) {
  return r.status.success() && (stop_step == 0 || r.steps.value_or(0) >= stop_step);
}

void settle_preemption(RunOutcome& o) {
  if (!o.preemption) return;
  PreemptionReport& p = *o.preemption;
  p.stopped_ranks.clear();
  for (RankOutcome& r : o.ranks) {
    const bool asked =
        std::find(p.polling_ranks.begin(), p.polling_ranks.end(), r.rank) != p.polling_ranks.end();
    if (!asked) continue;
    if (stopped_at_stop_step(r, p.stop_step))
      p.stopped_ranks.push_back(r.rank);
    else if (r.status.success())
      r.stopped_by_air_run = false;
  }
  if (o.status != RunOutcome::Status::preempted || p.polling_ranks.empty()) return;
  const std::string where =
      p.stop_step > 0 ? "step " + std::to_string(p.stop_step) : std::string("their next should_stop()");
  const std::string signal = signal_name(p.signal) + (p.cause == "time_limit" ? " (Slurm's time limit)" : "");
  if (p.stopped_ranks.empty()) {
    // Nothing was saved at the agreed step: not the preemption the status names.
    o.status = RunOutcome::Status::interrupted;
    o.reason = "stopped by " + signal + ", but no rank stopped at " + where + ": the " +
               (p.polling_ranks.size() == 1 ? "rank" : std::to_string(p.polling_ranks.size()) + " ranks") +
               " asked to stop there ended otherwise";
  } else if (p.stopped_ranks.size() < p.polling_ranks.size()) {
    o.reason = "preempted by " + signal + "; " + std::to_string(p.stopped_ranks.size()) + " of the " +
               std::to_string(p.polling_ranks.size()) + " ranks asked stopped at " + where;
  }
}

std::string remote_failure_reason(const RemoteFailure& f) {
  if (f.membership_change) return "stopped for a membership change: " + f.reason;
  std::string node = "node " + std::to_string(f.node_rank);
  if (!f.node_name.empty()) node += " (" + f.node_name + ")";
  if (f.hung) {
    // Node 0's reason starts "hung: no progress for ..."; say it once.
    const std::string_view prefix = "hung: ";
    const std::string rest = f.reason.rfind(prefix, 0) == 0 ? f.reason.substr(prefix.size()) : f.reason;
    return "stopped because " + node + " found the job hung: " + rest;
  }
  return "stopped because " + node + " failed: " + f.reason;
}

} // namespace air
