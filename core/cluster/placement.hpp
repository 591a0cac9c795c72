#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/spec/spec.hpp"

#include <optional>
#include <string>
#include <vector>

namespace air {

/// Where this agent stands among the nodes of the job: the result of reading
/// the spec (flags, AIR_RUN_*, YAML) and the engine's environment (Slurm).
/// Pure data; `apply_cluster` builds it.
struct ClusterContext {
  std::string source = "single"; ///< "slurm" (inside srun), "static" (--nnodes/--node-rank) or "single"
  int num_nodes = 1;
  int node_rank = 0;
  std::string node_name;             ///< SLURMD_NODENAME under Slurm, else this host's name
  std::string master_host;           ///< node 0: a Slurm node name or what --master-addr said
  bool master_is_slurm_node = false; ///< master_host is a Slurm node name; its NodeAddr may be resolved
  int master_port = 0;               ///< 0: choose a free port (single node only)
  int control_port = 0;              ///< node 0's agent listens here (multi-node only)
  Millis join_timeout{300'000};
  std::string job_id;               ///< Slurm job id, "" otherwise
  std::vector<std::string> nodes;   ///< node names by node rank, when Slurm lists them
  std::string gpus;                 ///< GPUs Slurm gave the step (SLURM_STEP_GPUS), "" when none
  std::vector<std::string> notices; ///< lines to print once before launch
  /// c10d rendezvous (source "c10d"): node_rank is -1 until node 0 hands one
  /// out at the join; num_nodes is the most nodes, min_nodes the fewest.
  bool c10d = false;
  bool may_host = false; ///< c10d: the endpoint is one of this machine's addresses
  int min_nodes = 1;
  Millis last_call_timeout{30'000};
  std::optional<Millis> read_timeout; ///< the control connection's silence limit, when given

  bool multi_node() const { return num_nodes > 1; }
  /// "node 1 (node2)", or "node 1" when the name is not known.
  std::string describe_node(int rank) const;
};

/// torchrun's default MASTER_PORT, used by static multi-node runs that give none.
inline constexpr int k_static_master_port = 29500;

/// Decides the cluster context and writes what it derived back into `spec`
/// with its origin, so --dry-run and the summary show where each value came
/// from ("env SLURM_NODEID"). Precedence: flags / AIR_RUN_* / YAML > Slurm's
/// environment > defaults.
///
/// - Inside an `srun` step (SLURM_STEP_ID set): nnodes, node_rank, the node
///   list and the node name come from Slurm; on several nodes master_addr is
///   the step's first node and master_port is `slurm_master_port(job id)`; the
///   run id defaults to "slurm-<job>.<step>". More than one task on a node is
///   an error: air-run starts the ranks itself.
/// - In a Slurm allocation without srun (batch script, salloc) the run stays
///   on this node, with a notice when the job has several nodes.
/// - Otherwise nnodes > 1 or a node rank means static (torchrun) mode, with
///   torchrun's default port 29500 when none is given.
/// - rdzv_backend c10d on several nodes: node ranks are given at the join
///   (node_rank -1 here), the join point is rdzv_endpoint (port 29400 by
///   default), which is also the ranks' MASTER_ADDR; MASTER_PORT is chosen
///   by the node that hosts the join unless master_port is given.
/// On several nodes the control port is master_port + 1 unless given.
/// Errors are usage errors naming the setting.
Expected<ClusterContext> apply_cluster(LaunchSpec& spec, const Environment& env,
                                       const std::string& host_name);

/// Replaces "{node_rank}" and "{node_name}" in `text` (summary, JUnit and log
/// paths), so one command line gives each node its own file.
std::string expand_node_placeholders(const std::string& text, const ClusterContext& cluster);

} // namespace air
