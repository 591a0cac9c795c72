#pragma once

#include "core/cluster/control_message.hpp"
#include "core/os/link.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace air {

/// One connection of the control channel: node 0 holds one per other node
/// (and per agent still joining), the others one to node 0. Its node rank is
/// the one the connection earned at its hello (node 0's side) or 0 (the
/// others' side): every message that names a node is checked against it.
struct ControlPeer {
  Link link;
  int node_rank = -1; ///< -1 until its hello (node 0's side)
  std::string name;
  bool done = false;          ///< node 0's side: it said `done`
  std::string nonce;          ///< node 0's side: the challenge it sent
  std::string source;         ///< node 0's side: the address it connected from
  bool authenticated = false; ///< node 0's side: its `auth` checked out
  std::chrono::steady_clock::time_point connected{};
  bool violation_told = false; ///< node 0's side: a message spoke for another node (told once)
};

using ControlPeers = std::vector<std::unique_ptr<ControlPeer>>;

/// Sends one message; false when the connection is closed or gone.
inline bool send_message(ControlPeer& peer, const ControlMessage& m) {
  return peer.link.send(format_control_message(m));
}

/// Sends `m` to every open connection but `except`: the one way node 0
/// tells all nodes something (and the others tell node 0).
inline void send_to_all(ControlPeers& peers, const ControlMessage& m, const ControlPeer* except = nullptr) {
  for (auto& peer : peers)
    if (peer.get() != except) send_message(*peer, m);
}

/// A `refuse CODE TEXT` line.
inline ControlMessage refuse_message(int exit_code, std::string text) {
  ControlMessage m;
  m.kind = ControlMessage::Kind::refuse;
  m.exit_code = exit_code;
  m.text = std::move(text);
  return m;
}

/// What a `refuse CODE TEXT` means to the agent that sends or receives it:
/// code 2 is a usage error (the nodes disagree on the job), any other a
/// system error; the text is the error's message.
inline Error refusal_error(int exit_code, std::string text) {
  return Error{exit_code == 2 ? ErrorKind::usage : ErrorKind::system, std::move(text)};
}

} // namespace air
