#include "cli/attempt_hooks.hpp"

#include "core/os/host.hpp"
#include "core/report/collect.hpp"

namespace air::cli {

namespace {

/// A fresh port for rank 0's store: the last attempt's may still be held by
/// a TCPStore socket in TIME_WAIT or by a straggler. Falls back to `current`.
int fresh_port(const std::string& addr, int current) {
  auto port = choose_free_port(addr);
  return port ? *port : current;
}

} // namespace

std::optional<int> CliAttemptHooks::next_attempt(RunOutcome& outcome, int next, bool restartable) {
  if (channel_ == nullptr) {
    if (!restartable) return std::nullopt;
    return fresh_port(master_addr_, 0);
  }
  channel_->settle(outcome); // every node's group has ended: done everywhere, or a failure somewhere
  if (outcome.status == RunOutcome::Status::succeeded) return std::nullopt;
  const bool may = restartable_outcome(outcome);
  const int port = channel_->node_rank() == 0 ? fresh_port(master_addr_, channel_->master_port()) : 0;
  return channel_->agree_restart(outcome, may, next, port);
}

void CliAttemptHooks::record_attempt(const LaunchPlan& plan, const RunOutcome& outcome,
                                     AttemptRecord& record) {
  for (const auto& rank : plan.ranks) {
    if (rank.rank != outcome.root_cause_rank) continue;
    if (const auto error = read_error_file(rank.error_file); error && !error->malformed) {
      record.error = error->type.empty() ? error->message : error->type + ": " + error->message;
    }
  }
}

} // namespace air::cli
