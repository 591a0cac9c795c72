#pragma once

#include "core/cluster/control.hpp"
#include "core/run/attempts.hpp"

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

  std::optional<int> next_attempt(RunOutcome& outcome, int next, bool restartable) override;
  void record_attempt(const LaunchPlan& plan, const RunOutcome& outcome, AttemptRecord& record) override;

private:
  ControlChannel* channel_; ///< nullptr on one node
  std::string master_addr_;
};

} // namespace air::cli
