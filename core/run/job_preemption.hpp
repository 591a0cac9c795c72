#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

// A preemption decided across nodes (docs/preemption.md, "Several nodes"):
// node 0's agent gathers every node's step counts and picks the one step
// every polling rank of the job stops at. Pure.

namespace air {

/// One node's polling ranks, as counted for a preemption.
struct NodeSteps {
  int node = 0;
  int polling = 0;         ///< its ranks that call air.should_stop(); 0: none (they get the signal)
  std::uint64_t steps = 0; ///< the furthest of them
  double rate = 0;         ///< its fastest one's steps per second; 0: unknown
  /// Seconds from the moment the count was taken until the stop step is in
  /// the node's pages: how long its ranks keep training unaware.
  double lead_s = 0;
};

/// How long node 0 waits for the nodes' step counts before it decides
/// without the silent ones: a node answers from its supervisor's loop, which
/// wakes for the line at once, so a healthy node answers within a round trip
/// and a few ms; a second covers a loaded machine, and keeps the whole
/// decision well inside the agents' own wait below.
inline constexpr std::chrono::milliseconds k_preempt_counts_wait{1000};

/// How long an agent that got a preemption signal waits for node 0's stop
/// step before it decides for its own ranks alone (as one node does): node
/// 0's wait for counts above, two round trips and a margin for load. Short
/// next to any sensible --grace-period (30 s by default), long next to a
/// round trip on a live control connection (heartbeats every second).
inline constexpr std::chrono::milliseconds k_preempt_decision_wait{2000};

/// The job's preemption as node 0 decided it, handed to every node's supervisor.
struct JobStop {
  int signal = 0;
  std::uint64_t stop_step = 0;        ///< 0: at the next should_stop()
  std::chrono::milliseconds grace{0}; ///< what is left of the grace period, from now
  int node = 0;                       ///< the node the signal reached first
  std::vector<int> missing_nodes;     ///< node 0: nodes whose counts did not come in time
};

/// Extra time every node's lead is given, on top of doubling it: the
/// receiving agent's loop may be busy for tens of ms with rank output, a
/// rank reads its page only at its next should_stop(), and a step may run
/// faster than the measured rate (after an evaluation).
inline constexpr std::chrono::milliseconds k_preempt_slack{500};

/// The step no polling rank of the job can have passed when the decision
/// reaches it: for each node, the steps its fastest rank can make in twice
/// its lead plus the slack, rounded up (a rank may finish a step the moment
/// after it was counted), plus one, the step it then stands in; the job's is
/// the furthest node's. 0 (stop at the next should_stop()) when no polling
/// rank counted a step. Nodes with no polling rank do not count.
std::uint64_t pick_stop_step(const std::vector<NodeSteps>& nodes);

} // namespace air
