#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// What Slurm tells a task through its environment, read by `read_slurm_env`.
/// Pure data; the cluster resolver (core/cluster/placement.hpp) turns it into a
/// ClusterContext.
struct SlurmEnv {
  std::string job_id;              ///< SLURM_JOB_ID (or SLURM_JOBID)
  std::optional<int> step_id;      ///< SLURM_STEP_ID; nullopt outside `srun` (batch script, salloc)
  int num_nodes = 1;               ///< the step's node count (the job's outside a step)
  int node_id = 0;                 ///< SLURM_NODEID: this node's index in the node list
  std::vector<std::string> nodes;  ///< expanded SLURM_STEP_NODELIST (or the job's)
  std::string node_name;           ///< SLURMD_NODENAME, "" when unset
  int local_id = 0;                ///< SLURM_LOCALID: this task's index on its node
  int tasks_on_this_node = 1;      ///< from SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE
  std::string tasks_per_node_text; ///< the variable as Slurm wrote it, for messages
  std::string gpus;                ///< SLURM_STEP_GPUS or SLURM_JOB_GPUS, "" when none
};

/// Reads the Slurm variables of `env`. nullopt when this is not a Slurm job
/// (no SLURM_JOB_ID). Inside a step (`srun`) the step's variables win over
/// the job's: SLURM_STEP_NUM_NODES over SLURM_NNODES / SLURM_JOB_NUM_NODES,
/// SLURM_STEP_NODELIST over SLURM_JOB_NODELIST / SLURM_NODELIST. Errors
/// (usage) name the variable: "SLURM_NODEID: expected a whole number, got 'x'".
Expected<std::optional<SlurmEnv>> read_slurm_env(const Environment& env);

/// How far a host list or a list of task counts may expand. Past the default
/// it is a typo ("node[1-99999999]"), not a cluster: 100,000 names (the most
/// nodes a job may have, as --nnodes) and 8 MiB of names in all, since long
/// names times many ranges would otherwise take gigabytes and minutes. The
/// fuzz target passes small bounds, so that its inputs stay cheap and the
/// bound checks are reached often.
struct HostlistBounds {
  std::size_t max_hosts = 100'000;
  std::size_t max_bytes = 8 * 1024 * 1024;
};

/// Expands a Slurm host list: "node[1-2,5],gpu-a[01-03]" -> node1 node2
/// node5 gpu-a01 gpu-a02 gpu-a03. Zero padding follows the range's first
/// number; several bracket groups in one name multiply out
/// ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2), as `scontrol show hostnames` does.
/// Errors name the list: "host list 'node[1-': unclosed '['".
Expected<std::vector<std::string>> expand_hostlist(std::string_view text, HostlistBounds bounds = {});

/// Expands Slurm's compressed per-node counts: "2(x3),1" -> {2,2,2,1}.
/// At most `bounds.max_hosts` entries.
Expected<std::vector<int>> expand_tasks_per_node(std::string_view text, HostlistBounds bounds = {});

/// The MASTER_PORT every node of Slurm job `job_id` derives without talking:
/// 15000 + (job_id mod 7500) * 2. Even ports in [15000, 29998], below Linux's
/// ephemeral range (32768+) so no outgoing connection holds it; the odd port
/// right above is the control port, so jobs whose ids differ by less than
/// 7500 never share either port. A non-numeric id (heterogeneous job
/// "123+1") uses its leading digits.
int slurm_master_port(std::string_view job_id);

/// The NodeAddr in `scontrol show node -o NAME` output; nullopt when absent.
std::optional<std::string> parse_scontrol_node_addr(std::string_view text);

/// KillWait in seconds from `scontrol show config` output ("KillWait = 30 sec").
std::optional<int> parse_scontrol_kill_wait(std::string_view text);

/// EndTime in `scontrol show job -o ID` output ("2026-12-07T03:26:04", the
/// controller's local time): when the time limit ends the job. For a Slurm
/// that does not set SLURM_JOB_END_TIME (22.05, Debian 12's). nullopt when absent
/// or not a time ("Unknown", "None").
std::optional<std::string> parse_scontrol_end_time(std::string_view text);

} // namespace air
