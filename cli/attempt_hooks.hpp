#pragma once

#include "core/cluster/control.hpp"
#include "core/run/attempts.hpp"

#include <functional>
#include <map>
#include <string>

namespace air::cli {

/// The CLI's side of restarts (core/run/attempts.hpp). On one node: a new
/// free master port after a restartable failure. On several nodes: the
/// control connection settles the attempt and node 0 decides for every node
/// (`agree_restart`), choosing the next master port itself. Each attempt's
/// record gets the root cause's error-file headline.
class CliAttemptHooks : public AttemptHooks {
public:
  CliAttemptHooks(ControlChannel* channel, std::string master_addr)
      : channel_(channel), master_addr_(std::move(master_addr)) {}

  /// Plans this node's group again for a new node rank and node count.
  using Replanner = std::function<Expected<LaunchPlan>(int node_rank, int num_nodes)>;
  void set_replanner(Replanner replanner) { replanner_ = std::move(replanner); }

  std::optional<int> next_attempt(RunOutcome& outcome, int next, bool restartable) override;
  void record_attempt(const LaunchPlan& plan, const RunOutcome& outcome, AttemptRecord& record) override;
  /// After a node was lost (ControlChannel::elastic): the plan at the node
  /// rank and node count node 0 handed out.
  std::optional<LaunchPlan> regroup(const LaunchPlan& first) override;

private:
  ControlChannel* channel_; ///< nullptr on one node
  std::string master_addr_;
  Replanner replanner_;
  /// Each attempt's nodes, taken before the agreement on the next one changes them.
  std::map<int, std::vector<std::string>> nodes_of_attempt_;
};

} // namespace air::cli
