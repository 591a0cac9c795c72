// Node 0's door for agents: accept, authenticate, hear the hello.
#include "core/cluster/join_gate.hpp"

#include "core/base/duration.hpp"
#include "core/base/sha256.hpp"
#include "core/cluster/join_admission.hpp"

#include <fmt/format.h>

#include <cerrno>

namespace air {

namespace {

using std::chrono::milliseconds;

/// Connections node 0 holds that have not said hello yet, in all and per
/// source address (core/cluster/join_admission.hpp): strangers can neither
/// exhaust its descriptors nor push a real node's connection out.
constexpr AdmissionLimits k_admission{64, 8, milliseconds(1'000)};
/// How long a connection may take to authenticate (a real agent needs one
/// round trip), and to authenticate and say hello.
constexpr milliseconds k_auth_timeout{5'000};
constexpr milliseconds k_hello_timeout{10'000};
/// Connections taken from the listener per wake, so a flood cannot keep
/// node 0 from reading the connections it holds.
constexpr int k_max_accepts_per_wake = 256;
/// Out of descriptors with none to spare: the listener rests this long
/// instead of waking the loop again at once.
constexpr milliseconds k_accept_pause{100};

std::vector<WaitingConnection> waiting_view(const ControlPeers& connections) {
  std::vector<WaitingConnection> view;
  for (const auto& p : connections) view.push_back({p->source, p->authenticated, p->connected});
  return view;
}

} // namespace

JoinGate::JoinGate(JoinSecret secret, Mode mode) : secret_(std::move(secret)), mode_(mode) {
  if (mode_ == Mode::join) spare_ = spare_descriptor();
}

bool JoinGate::make_room(int listener, ControlPeers& pending) {
  if (mode_ != Mode::join) return false;
  // No descriptor left while connections wait: the listener stays readable,
  // so polling it again would spin. Make room from the busiest source, else
  // take the connection with the spare descriptor and close it (a real agent
  // retries), else rest.
  if (auto drop = connection_to_drop(waiting_view(pending), Clock::now(), k_admission)) {
    refused_ = "a connection from " + pending[*drop]->source + " that did not authenticate";
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(*drop));
    return true;
  }
  if (spare_) {
    spare_.reset();
    const bool dropped = accept_and_close(listener);
    spare_ = spare_descriptor();
    if (dropped) return true;
  }
  return false;
}

void JoinGate::accept(int listener, ControlPeers& pending, Clock::time_point now) {
  if (resting(now)) return;
  for (int taken = 0; taken < k_max_accepts_per_wake; ++taken) {
    Accepted accepted = accept_tcp(listener);
    if (!accepted.fd && (accepted.error == EINTR || accepted.error == ECONNABORTED)) continue;
    if (!accepted.fd && (accepted.error == EMFILE || accepted.error == ENFILE)) {
      if (make_room(listener, pending)) continue;
      accept_resumes_ = Clock::now() + k_accept_pause;
    }
    if (!accepted.fd) return;
    const Admission admission = admit_connection(waiting_view(pending), accepted.source, now, k_admission);
    if (admission.verdict == Admission::Verdict::refuse) continue; // closed: a real agent retries
    if (admission.verdict == Admission::Verdict::evict_then_admit)
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(admission.evict));
    auto peer = std::make_unique<ControlPeer>();
    peer->link = Link(std::move(accepted.fd));
    peer->source = accepted.source;
    peer->connected = now;
    peer->nonce = random_nonce();
    if (!peer->link.send(format_challenge(peer->nonce))) peer->link.close();
    pending.push_back(std::move(peer));
  }
}

JoinGate::Heard JoinGate::drop(ControlPeer& peer, int exit_code, std::string why) {
  send_message(peer, refuse_message(exit_code, std::move(why)));
  peer.link.close();
  return {Heard::State::dropped, {}};
}

JoinGate::Heard JoinGate::hear(ControlPeer& p, Clock::time_point now) {
  const Heard waiting{Heard::State::waiting, {}};
  const Heard dropped{Heard::State::dropped, {}};
  const auto lines = p.link.read_lines();
  const auto age = now - p.connected;
  if (!p.authenticated && lines.empty() && age > k_auth_timeout) {
    refused_ = fmt::format("a connection from {} that did not authenticate within {}", p.source,
                           format_duration(k_auth_timeout));
    p.link.close();
    return dropped;
  }
  if (age > k_hello_timeout) {
    refused_ = fmt::format("a connection from {} that did not authenticate and say hello within {}", p.source,
                           format_duration(k_hello_timeout));
    p.link.close();
    return dropped;
  }
  if (lines.empty() || (mode_ == Mode::late && p.link.closed())) return waiting;
  std::size_t next = 0; // the line that must be hello
  // Nothing a connection says counts before it proves it holds the join
  // token: a stranger is dropped without disturbing the join.
  if (!p.authenticated) {
    const auto auth = parse_auth(lines.front());
    if (!auth ||
        !equal_in_constant_time(auth->proof, join_proof(secret_, JoinRole::agent, p.nonce, auth->nonce))) {
      refused_ = "a connection that failed authentication (not this job, or another join token)";
      return drop(p, 2,
                  "node 0's agent refused the connection: wrong join token or job id (AIR_RUN_JOIN_TOKEN)");
    }
    p.authenticated = true;
    if (!p.link.send_even_if_closed(
            format_proof(join_proof(secret_, JoinRole::node0, p.nonce, auth->nonce)))) {
      p.link.close();
      return dropped;
    }
    next = 1;
    if (lines.size() < 2) return waiting;
  }
  const std::string& line = lines[next];
  auto hello = parse_control_message(line);
  if (!hello || hello->kind != ControlMessage::Kind::hello) {
    refused_ = hello ? fmt::format("expected hello, got '{}'", line) : hello.error().message;
    return drop(p, 2, "node 0's agent refused the connection: " + refused_);
  }
  return {Heard::State::hello, std::move(*hello)};
}

} // namespace air
