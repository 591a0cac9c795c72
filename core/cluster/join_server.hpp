#pragma once

#include "core/base/error.hpp"
#include "core/base/unique_fd.hpp"
#include "core/cluster/control_options.hpp"
#include "core/cluster/control_peer.hpp"
#include "core/cluster/join_gate.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace air {

/// Node 0's side of the join barrier: waits on the control port until every
/// node (c10d MIN:MAX: at least MIN, then the last call) authenticated and
/// said a hello that agrees with node 0 on the node count and ranks per
/// node, then sends each its `start`. Any disagreement, a node that leaves,
/// the join timeout or a signal refuses every agent connected so far, so no
/// agent waits for a start that will never come.
class JoinServer {
public:
  using Clock = std::chrono::steady_clock;

  explicit JoinServer(const ControlOptions& options);

  /// Runs the join on `listener` (kept open: elastic jobs listen on). The
  /// joined connections in node-rank order (node 1 first); their count + 1
  /// is the job's node count. Errors as ControlChannel::join says.
  Expected<ControlPeers> run(const UniqueFd& listener);
  /// The signal that ended the join (0: none), or that ended an agent's
  /// wait before the start (its `fail` with 128+N).
  int interrupted_by() const { return interrupted_by_; }

private:
  /// Whether enough nodes are in: all of them, or MIN once the last call ended.
  bool enough();
  /// Tells every agent joined so far (and `also`) that the job cannot start.
  Error refuse_all(int code, const std::string& message, ControlPeer* also);
  /// The join timeout's error, naming the nodes that never came.
  Error timed_out();
  /// One wait on every connection; an error ends the join.
  std::optional<Error> wait_once(const UniqueFd& listener);
  /// A joined agent that failed or left before the start ends the join.
  std::optional<Error> hear_joined();
  /// Judges a hello; an error refuses the whole job, a surplus agent alone
  /// is refused (false), a good one joins (true).
  Expected<bool> take_hello(std::unique_ptr<ControlPeer>& peer, const ControlMessage& hello);
  Expected<ControlPeers> send_start();

  const ControlOptions& options_;
  const int max_nodes_;
  const int min_nodes_;
  const Clock::time_point deadline_;
  std::optional<Clock::time_point> last_call_; ///< c10d MIN:MAX: when the wait for more ends
  JoinGate gate_;
  ControlPeers pending_;                               ///< connected, no hello yet
  std::map<int, std::unique_ptr<ControlPeer>> joined_; ///< by node rank
  int interrupted_by_ = 0;
};

} // namespace air
