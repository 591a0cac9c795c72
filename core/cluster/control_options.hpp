#pragma once

#include "core/run/job_preemption.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace air {

/// What an agent needs to join the others (see ControlChannel).
struct ControlOptions {
  int node_rank = 0;
  int num_nodes = 2;
  int ranks_per_node = 1;
  std::string node_name;               ///< this node, for messages
  std::vector<std::string> node_names; ///< by node rank when known (Slurm), for messages
  std::string master_host;             ///< where node 0's agent listens (used by nodes > 0)
  int port = 0;                        ///< node 0's control port
  std::string run_id;                  ///< node 0's run id, handed to every node with `start`
  std::string mlflow_experiment_id;    ///< node 0's MLflow run, handed on with `start` ("" = none)
  std::string mlflow_run_id;
  std::string join_token; ///< the job's shared secret (AIR_RUN_JOIN_TOKEN), "" when none
  std::string job_id;     ///< bound into the join proofs (Slurm's job id), "" when none
  std::chrono::milliseconds join_timeout{300'000};
  std::chrono::milliseconds heartbeat_interval{1'000};
  std::chrono::milliseconds heartbeat_timeout{5'000}; ///< a peer silent this long is a dead agent
  /// c10d rendezvous: node ranks are handed out by node 0 in order of
  /// arrival (node_rank is ignored; node 0 is the agent that binds `port`),
  /// and num_nodes may be a range min_nodes..num_nodes.
  bool c10d = false;
  bool may_host = true; ///< c10d: `master_host` is this machine, so try to bind `port` first
  int min_nodes = 0;    ///< c10d: 0 = num_nodes
  std::chrono::milliseconds last_call_timeout{30'000}; ///< c10d: wait this long for more once min joined
  int master_port = 0;   ///< node 0: the ranks' MASTER_PORT, handed to every node with `start`
  int interrupt_fd = -1; ///< a signalfd (InterruptWatch): a signal ends every wait with exit 128+N
  /// A line for the user while joining (an agent that joined a running job
  /// waits for the next restart), and from node 0's agent once its ranks
  /// finished (the job's quiet is no hang); nullptr: none.
  std::function<void(const std::string&)> notice;
  /// Node 0: how long a job-wide hang diagnosis waits for the nodes' places:
  /// a node's stack dumps take up to 5 s (with Flight Recorder traces), then
  /// a round trip. A node still silent then is named as missing.
  std::chrono::milliseconds places_wait{10'000};
  /// Node 0: how long a preemption waits for the nodes' step counts
  /// (core/run/job_preemption.hpp says why this long).
  std::chrono::milliseconds counts_wait{k_preempt_counts_wait};
};

/// How messages name a node: "node 1 (beta)", or "node 1" when no name is
/// known. The name comes from options.node_names (Slurm), this node's own
/// name, else `said` (what the agent called itself; "?" is none).
std::string node_label(const ControlOptions& options, int node_rank, const std::string& said);
/// The name alone ("" when none is known), for a RemoteFailure's node_name.
std::string node_plain_name(const ControlOptions& options, int node_rank, const std::string& said);

} // namespace air
