#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/cluster/control.hpp"
#include "core/cluster/placement.hpp"
#include "core/run/outcome.hpp"
#include "core/spec/spec.hpp"

#include <memory>
#include <string>

namespace air::cli {

/// The multi-node part of `air-run`'s run flow, kept out of cmd_run.cpp:
/// decides where this node stands (core/cluster/placement.hpp), then settles what needs
/// the OS. Under Slurm it asks `scontrol` for node 0's NodeAddr (the name is
/// kept when scontrol is missing or says nothing) and for KillWait, so that
/// a default grace period ends before Slurm's SIGKILL (2/3 of KillWait). It
/// picks a free master port on one node and checks a given one on node 0, and
/// expands {node_rank} and {node_name} in the summary, JUnit and log paths.
/// Writes the results into `spec` (master_addr, master_port, grace_period...).
Expected<ClusterContext> resolve_cluster(LaunchSpec& spec, const Environment& env, bool dry_run);

/// One line for stderr before launch on several nodes:
/// "node 1/2 (node2), ranks 2-3 of 4, master 10.0.0.1:15000, control port 15001, via slurm job 42".
std::string describe_cluster(const ClusterContext& cluster, int ranks_per_node);

/// On several nodes, joins the others through node 0's agent (blocking, up to
/// join_timeout) and returns the channel to hand to `supervise`; nullptr on
/// one node. `run_id` is node 0's proposal; the channel's run_id() is the one
/// every node uses. Node 0 hands its MLflow run (ids, "" = none) on the same
/// way. Every connection proves it holds the job's secret: AIR_RUN_JOIN_TOKEN
/// from `env`, else the file AIR_RUN_JOIN_TOKEN_FILE names (ours, mode 0600);
/// without either node 0 warns that the join is unauthenticated. A signal on
/// `interrupt_fd` (an InterruptWatch) ends the wait, with `*interrupted_by` set to it.
Expected<std::unique_ptr<ControlChannel>> join_cluster(const ClusterContext& cluster, int ranks_per_node,
                                                       const std::string& run_id, const Environment& env,
                                                       int interrupt_fd, int* interrupted_by,
                                                       const std::string& mlflow_experiment_id = "",
                                                       const std::string& mlflow_run_id = "");

/// Replaces {node_rank} and {node_name} in the summary, JUnit and log paths;
/// under c10d rendezvous, once the join has given this node its rank.
void expand_after_join(LaunchSpec& spec, const ClusterContext& cluster);

/// Tells the other nodes that this node cannot run (its target is missing,
/// its plan failed) with the exit code `error` will give, and closes the
/// channel; they stop with that code. Does nothing without a channel.
void report_setup_failure(ControlChannel* control, const Error& error);

/// Under Slurm, on node 0, once a stop on Slurm's warning signal (SIGUSR1 or
/// SIGUSR2: `--signal=B:USR1@N`) ended with every asked rank stopped at the
/// agreed step: asks Slurm to requeue the job (`scontrol requeue`), so that
/// its next run resumes from the checkpoint just written rather than the
/// job ending FAILED at 128+N. Records how it went in the outcome's
/// preemption (`requeue`: "requeued", or why not) and says so on stderr.
/// A job that may not be requeued (`--no-requeue`, an interactive srun)
/// gets scontrol's refusal recorded.
void requeue_after_warning(const ClusterContext& cluster, RunOutcome& outcome, const Environment& env);

} // namespace air::cli
