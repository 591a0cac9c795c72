#pragma once

#include "core/base/error.hpp"
#include "core/cluster/control_auth.hpp"
#include "core/cluster/control_options.hpp"
#include "core/cluster/control_peer.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace air {

/// What node 0's `start` (and, for an agent that joined a running job, the
/// `restart` after it) gave this node.
struct StartTerms {
  std::string run_id;
  int node_rank = 0;
  int num_nodes = 0;
  int master_port = 0;
  std::string mlflow_experiment_id;
  std::string mlflow_run_id;
  int first_attempt = 0; ///< the attempt it starts in (a late agent: the restart's)
};

/// An agent's side of the join barrier: connects to node 0's control port
/// (retrying while node 0 is not up, or closes the connection before the
/// handshake), answers its challenge, checks its proof, says hello and waits
/// for `start`. A late agent (c10d MIN:MAX, the job running) is told `wait`
/// and waits, however long, for the group's next restart.
class JoinClient {
public:
  using Clock = std::chrono::steady_clock;

  explicit JoinClient(const ControlOptions& options);

  /// The connection to node 0 once the job starts, with the terms in
  /// `terms`; lines that came with the start stay unread on it. Errors as
  /// ControlChannel::join says.
  Expected<std::unique_ptr<ControlPeer>> run(StartTerms& terms);
  /// The signal that ended the wait (0: none), this node's or, through a
  /// `refuse` with 128+N, another node's.
  int interrupted_by() const { return interrupted_by_; }

private:
  /// Waits a moment before connecting again; an error when a signal came.
  Status wait_before_retry();
  /// One connection's join handshake: the connection, or nullptr when node 0
  /// closed it before proving itself (the caller connects again).
  Expected<std::unique_ptr<ControlPeer>> handshake(std::unique_ptr<ControlPeer> peer, StartTerms& terms);
  /// Node 0's challenge; nullopt when the connection closed before a word.
  /// The lines that came after it go to `early`.
  Expected<std::optional<std::string>> await_challenge(ControlPeer& peer, std::vector<std::string>& early);
  /// After the hello: node 0's proof, then `start` (or `wait`, `start` and
  /// `restart`). true: started; false: closed before node 0 proved itself.
  Expected<bool> await_start(ControlPeer& peer, const std::string& challenge, const std::string& nonce,
                             std::vector<std::string> early, StartTerms& terms);
  /// A signal while waiting for the start: node 0 is told, the error says so.
  std::optional<Error> interrupted(ControlPeer& peer, const StartTerms& terms);

  const ControlOptions& options_;
  const JoinSecret secret_;
  const Clock::time_point deadline_;
  const std::string where_; ///< "host:port" of node 0's agent
  int interrupted_by_ = 0;
};

} // namespace air
