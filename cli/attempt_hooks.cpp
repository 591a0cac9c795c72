#include "cli/attempt_hooks.hpp"

#include "core/base/speaker.hpp"
#include "core/os/host.hpp"
#include "core/report/collect.hpp"

#include <fmt/format.h>

#include <cstdio>

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
  nodes_of_attempt_[next - 1] = channel_->node_names();
  channel_->settle(outcome); // every node's group has ended: done everywhere, or a failure somewhere
  if (outcome.status == RunOutcome::Status::succeeded) return std::nullopt;
  const bool may = restartable_outcome(outcome);
  const int port = channel_->node_rank() == 0 ? fresh_port(master_addr_, channel_->master_port()) : 0;
  return channel_->agree_restart(outcome, may, next, port);
}

std::optional<LaunchPlan> CliAttemptHooks::regroup(const LaunchPlan& first) {
  if (channel_ == nullptr || !replanner_) return std::nullopt;
  if (channel_->node_rank() == first.node_rank && channel_->num_nodes() == first.num_nodes)
    return std::nullopt;
  auto plan = replanner_(channel_->node_rank(), channel_->num_nodes());
  if (!plan) {
    // Planning succeeded at the start with the same spec: only a bug lands here.
    say_on_stderr(fmt::format("air-run: cannot plan node {} of {}: {}\n", channel_->node_rank(),
                              channel_->num_nodes(), plan.error().message));
    return std::nullopt;
  }
  set_console_node(plan->node_rank, plan->num_nodes); // its lines name the node it is now
  say_on_stderr(fmt::format("air-run: the nodes changed: this is node {} of {} now, world size {}\n",
                            plan->node_rank, plan->num_nodes, plan->world_size));
  return std::move(*plan);
}

void CliAttemptHooks::record_attempt(const LaunchPlan& plan, const RunOutcome& outcome,
                                     AttemptRecord& record) {
  if (channel_ != nullptr) {
    const auto taken = nodes_of_attempt_.find(plan.attempt);
    record.nodes = taken != nodes_of_attempt_.end() ? taken->second : channel_->node_names();
  }
  for (const auto& rank : plan.ranks) {
    if (rank.rank != outcome.root_cause_rank) continue;
    if (const auto error = read_error_file(rank.error_file); error && !error->malformed) {
      record.error = error->type.empty() ? error->message : error->type + ": " + error->message;
    }
  }
}

} // namespace air::cli
