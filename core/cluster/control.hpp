#pragma once

#include "core/base/error.hpp"
#include "core/base/unique_fd.hpp"
#include "core/run/supervisor.hpp"

#include <chrono>
#include <memory>
#include <optional>
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
};

/// The small TCP connection every agent keeps to node 0's agent during a
/// multi-node run (static mode and Slurm): node 0 listens on the control
/// port; the others connect, say `hello`, and wait for `start`, which node 0
/// sends once every node joined with the same node count and ranks per node.
/// During the run a failure anywhere (`fail`) becomes `abort` to every node;
/// heartbeats every second catch an agent that died without a word
/// (silence for 5 s) and a closed socket catches one that exited. At the end
/// the nodes agree (`done` / `finish`) so that every node exits with the same
/// code: 0, or the failing node's. Protocol lines: core/cluster/control_message.hpp.
///
/// Use: `join` before planning (it blocks), pass the channel to `supervise`
/// as its hooks, then `finish` with the outcome. Not thread-safe; no signals.
class ControlChannel : public SupervisorHooks {
public:
  /// Joins the job: node 0 binds `port` on every interface and waits up to
  /// join_timeout for the other nodes; the others connect to
  /// master_host:port with retries until join_timeout, then wait for start.
  /// Errors: usage (exit 2) when nodes disagree on the node count or ranks
  /// per node, naming the node ("node 1 (node2) runs 3 ranks, node 0 (node1)
  /// runs 2: ..."); system (exit 125) for a node that never joined ("node 1
  /// (node2) did not join within 5s"), an unreachable node 0, or a socket
  /// call that failed.
  static Expected<std::unique_ptr<ControlChannel>> join(const ControlOptions& options);

  ~ControlChannel() override;
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  /// The run id node 0 chose; every node uses it.
  const std::string& run_id() const { return run_id_; }

  /// The MLflow run node 0 created ("" when none): every node's ranks log into it.
  const std::string& mlflow_experiment_id() const { return mlflow_experiment_id_; }
  const std::string& mlflow_run_id() const { return mlflow_run_id_; }

  /// Tells the other nodes that this node failed before or without
  /// supervising (a target that cannot start): they stop with `exit_code`.
  void report_failure(int exit_code, int rank, const std::string& reason);

  /// After `supervise`: reports a local failure not yet reported, or, when
  /// every local rank succeeded, waits until every node is done (node 0
  /// answers `finish`) or one fails. A failure elsewhere is written into
  /// `outcome` (status failed, remote_failure, reason), so every node exits
  /// with the failing node's code. Closes the connection gracefully.
  void finish(RunOutcome& outcome);

  // SupervisorHooks
  std::vector<int> poll_fds() const override;
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const override;
  std::optional<RemoteFailure> check(std::chrono::steady_clock::time_point now) override;
  void local_failure(const RunOutcome& outcome) override;

  struct Peer; ///< one connection (defined in control.cpp)

private:
  explicit ControlChannel(ControlOptions options);
  Status serve_join();
  Status client_join();
  std::optional<RemoteFailure> pump(std::chrono::steady_clock::time_point now);
  std::optional<RemoteFailure> on_line(Peer& peer, const std::string& line);
  void broadcast_abort(const RemoteFailure& failure, const Peer* except);
  void close_gracefully();
  std::string plain_name(int node_rank, const std::string& said) const;
  std::string name_of(int node_rank, const std::string& said) const;

  ControlOptions options_;
  std::string run_id_;
  std::string mlflow_experiment_id_;
  std::string mlflow_run_id_;
  std::vector<std::unique_ptr<Peer>> peers_; ///< node 0: one per other node; others: node 0
  std::chrono::steady_clock::time_point next_heartbeat_{};
  bool failure_reported_ = false;       ///< this node's failure (or node 0's abort) is out
  std::optional<RemoteFailure> remote_; ///< the failure elsewhere that stopped this node
  bool finished_ = false;               ///< client: node 0 said finish
};

} // namespace air
