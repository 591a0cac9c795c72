#pragma once

#include "core/cluster/control_auth.hpp"
#include "core/cluster/control_message.hpp"
#include "core/cluster/control_peer.hpp"

#include <chrono>
#include <string>

namespace air {

/// Node 0's door for agents: takes new connections from the control port
/// under the admission limits (core/cluster/join_admission.hpp), sends each
/// its challenge, checks its `auth` (core/cluster/control_auth.hpp) and reads
/// its `hello`. What the hello says is the caller's to judge: the join server
/// (at the start) and late join (while the job runs) both come through here.
class JoinGate {
public:
  using Clock = std::chrono::steady_clock;

  /// join: at the start, out of descriptors node 0 makes room (the busiest
  /// source's silent connection, else one taken and closed with a spare
  /// descriptor), and a connection's last lines are heard even after its EOF.
  /// late: while the ranks run, the listener only rests, and a closed
  /// connection is not heard.
  enum class Mode { join, late };

  JoinGate(JoinSecret secret, Mode mode);

  /// Whether the listener rests now (out of descriptors): leave it out of poll.
  bool resting(Clock::time_point now) const { return now < accept_resumes_; }
  Clock::time_point resumes() const { return accept_resumes_; }

  /// Takes the connections waiting on `listener` (at most 256 a call, so a
  /// flood cannot keep node 0 from the connections it holds) into `pending`,
  /// each sent its challenge.
  void accept(int listener, ControlPeers& pending, Clock::time_point now);

  /// What one pending connection said so far.
  struct Heard {
    enum class State { waiting, dropped, hello };
    State state = State::waiting;
    ControlMessage hello; ///< State::hello: its hello, still to be judged
  };
  /// Reads one pending connection: drops it when silent too long, refuses it
  /// (`refuse 2`) and closes it on a wrong proof or a line that is not a
  /// hello, and answers a good `auth` with node 0's proof.
  Heard hear(ControlPeer& peer, Clock::time_point now);

  /// The last connection dropped and why, for a join that times out
  /// ("a connection from 10.0.0.9 that did not authenticate within 5s").
  const std::string& refused() const { return refused_; }
  void note_refused(std::string why) { refused_ = std::move(why); }

private:
  /// Out of descriptors: makes room as `mode_` allows; false: rest.
  bool make_room(int listener, ControlPeers& pending);
  Heard drop(ControlPeer& peer, int exit_code, std::string why);

  JoinSecret secret_;
  Mode mode_;
  UniqueFd spare_; ///< Mode::join: held in reserve for accept_and_close
  Clock::time_point accept_resumes_{};
  std::string refused_;
};

} // namespace air
