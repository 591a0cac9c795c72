// An agent's side of the join barrier.
#include "core/cluster/join_client.hpp"

#include "core/base/duration.hpp"
#include "core/base/exit_status.hpp"
#include "core/base/sha256.hpp"
#include "core/os/signals.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace air {

namespace {

using std::chrono::milliseconds;

/// Pause between connection attempts while node 0's agent is not up yet.
constexpr milliseconds k_retry_interval{200};

} // namespace

JoinClient::JoinClient(const ControlOptions& options)
    : options_(options), secret_{options.join_token, options.job_id},
      deadline_(Clock::now() + options.join_timeout),
      where_(fmt::format("{}:{}", options.master_host, options.port)) {}

Expected<std::unique_ptr<ControlPeer>> JoinClient::run(StartTerms& terms) {
  std::string dropped; // why the last connection ended before node 0 proved itself
  for (;;) {
    auto peer = std::make_unique<ControlPeer>();
    peer->node_rank = 0;
    std::string error;
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now());
      UniqueFd fd = connect_tcp(options_.master_host, options_.port,
                                std::clamp(left, milliseconds(1), milliseconds(2000)), error);
      if (fd) {
        peer->link = Link(std::move(fd));
        break;
      }
      if (Clock::now() + k_retry_interval >= deadline_) {
        if (!dropped.empty()) error = dropped + "; then " + error;
        return Error{ErrorKind::system, fmt::format("could not reach node 0's agent at {} within {}: {}",
                                                    where_, format_duration(options_.join_timeout), error)};
      }
      AIR_TRY(wait_before_retry());
    }
    auto joined = handshake(std::move(peer), terms);
    if (!joined || *joined) return joined;
    // Node 0 closed the connection before it proved itself: it had no room
    // for one more while others flooded its port, or it is not up yet. Try
    // again while the join timeout lasts.
    dropped = fmt::format("node 0's agent at {} closed the connection before the handshake", where_);
    if (Clock::now() + k_retry_interval >= deadline_) {
      return Error{ErrorKind::system, fmt::format("{}, each time until the join timeout ({})", dropped,
                                                  format_duration(options_.join_timeout))};
    }
    AIR_TRY(wait_before_retry());
  }
}

Status JoinClient::wait_before_retry() {
  pollfd wait{options_.interrupt_fd, POLLIN, 0};
  poll_retry(&wait, 1, static_cast<int>(k_retry_interval.count()));
  if (const int sig = take_signal(options_.interrupt_fd); sig != 0) {
    interrupted_by_ = sig;
    return Error{ErrorKind::system, fmt::format("interrupted by {} while waiting for node 0's agent at {}",
                                                signal_name(sig), where_)};
  }
  return ok_status();
}

Expected<std::optional<std::string>> JoinClient::await_challenge(ControlPeer& peer,
                                                                 std::vector<std::string>& early) {
  // Node 0 speaks first: its challenge, or this is not our protocol.
  bool not_ours = false;
  for (;;) {
    auto lines = peer.link.read_lines();
    if (!lines.empty()) {
      if (auto nonce = parse_challenge(lines.front())) {
        early.assign(lines.begin() + 1, lines.end());
        return std::optional<std::string>(*nonce);
      }
      not_ours = true;
    }
    if (peer.link.closed() && !not_ours)
      return std::optional<std::string>(); // closed before a word: try again
    const auto now = Clock::now();
    if (not_ours || now >= deadline_ + options_.join_timeout) {
      return Error{ErrorKind::system,
                   fmt::format("node 0's agent at {} sent no join challenge (not an air-run agent of this "
                               "version?)",
                               where_)};
    }
    pollfd p{peer.link.fd(), POLLIN, 0};
    poll_retry(&p, 1, std::min(poll_timeout(now, deadline_ + options_.join_timeout), 1000));
  }
}

Expected<std::unique_ptr<ControlPeer>> JoinClient::handshake(std::unique_ptr<ControlPeer> peer,
                                                             StartTerms& terms) {
  std::vector<std::string> early; // lines that came with the challenge
  auto challenge = await_challenge(*peer, early);
  if (!challenge) return challenge.error();
  if (!*challenge) return std::unique_ptr<ControlPeer>();
  // Answer the challenge with our proof, then hello.
  const std::string nonce = random_nonce();
  ControlMessage hello;
  hello.kind = ControlMessage::Kind::hello;
  hello.node_rank = options_.node_rank;
  hello.num_nodes = options_.num_nodes;
  hello.ranks_per_node = options_.ranks_per_node;
  hello.name = options_.node_name;
  if (!peer->link.send_even_if_closed(
          format_auth(nonce, join_proof(secret_, JoinRole::agent, **challenge, nonce))) ||
      !send_message(*peer, hello))
    return std::unique_ptr<ControlPeer>(); // closed while we answered: try again
  auto started = await_start(*peer, **challenge, nonce, std::move(early), terms);
  if (!started) return started.error();
  if (!*started) return std::unique_ptr<ControlPeer>();
  return peer;
}

Expected<bool> JoinClient::await_start(ControlPeer& peer, const std::string& challenge,
                                       const std::string& nonce, std::vector<std::string> early,
                                       StartTerms& terms) {
  bool node0_proven = false;
  bool waiting = false; // node 0 said `wait`: the job runs, this node joins at the next restart
  bool started = false; // after `wait`: `start` came, its `restart` (the attempt) follows
  // Node 0 may itself wait up to join_timeout for slower nodes.
  auto start_deadline = deadline_ + options_.join_timeout;
  for (;;) {
    std::vector<std::string> lines = std::move(early);
    early.clear();
    for (auto& line : peer.link.read_lines()) lines.push_back(std::move(line));
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i];
      if (!node0_proven) {
        // Whoever answers must prove it holds the token before we believe it.
        if (auto proof = parse_proof(line);
            proof && equal_in_constant_time(*proof, join_proof(secret_, JoinRole::node0, challenge, nonce))) {
          node0_proven = true;
          continue;
        }
        auto m = parse_control_message(line);
        if (m && m->kind == ControlMessage::Kind::refuse) return refusal_error(2, m->text);
        return Error{ErrorKind::usage,
                     fmt::format("the agent at {} could not prove it holds this job's join token "
                                 "(AIR_RUN_JOIN_TOKEN differs between the nodes, or it is not node 0)",
                                 where_)};
      }
      auto m = parse_control_message(line);
      if (!m) continue;
      if (m->kind == ControlMessage::Kind::wait && !waiting) {
        // The job is running: no start within the join timeout, it comes at the
        // group's next restart, however long the attempt runs.
        waiting = true;
        start_deadline = Clock::time_point::max();
        if (options_.notice)
          options_.notice("the job is running; node 0 admitted this node, which joins at the next restart");
        continue;
      }
      if (m->kind == ControlMessage::Kind::start) {
        terms.run_id = m->text;
        terms.node_rank = m->node_rank;
        terms.num_nodes = m->num_nodes;
        terms.master_port = m->master_port;
        terms.mlflow_experiment_id = m->mlflow_experiment_id;
        terms.mlflow_run_id = m->mlflow_run_id;
        started = true;
      }
      if (waiting && m->kind == ControlMessage::Kind::restart && started) {
        terms.first_attempt = m->attempt;
        terms.master_port = m->master_port;
        if (m->node_rank > 0) {
          terms.node_rank = m->node_rank;
          terms.num_nodes = m->num_nodes;
        }
      }
      if (started && (!waiting || m->kind == ControlMessage::Kind::restart)) {
        // What came with the start (an abort of a rank that failed at once) belongs to the run.
        peer.link.keep_unread({lines.begin() + static_cast<std::ptrdiff_t>(i) + 1, lines.end()});
        return true;
      }
      if (m->kind == ControlMessage::Kind::refuse) {
        // Another node's interrupt ends this one with the same 128+N.
        if (m->exit_code > 128 && m->exit_code < 128 + 65) interrupted_by_ = m->exit_code - 128;
        return refusal_error(m->exit_code, m->text);
      }
    }
    if (peer.link.closed()) {
      // Before node 0's proof the connection is nobody's yet: try again.
      if (!node0_proven) return false;
      return Error{
          ErrorKind::system,
          fmt::format("node 0's agent at {} closed the control connection before the start", where_)};
    }
    const auto now = Clock::now();
    if (now >= start_deadline) {
      return Error{ErrorKind::system, fmt::format("node 0's agent at {} did not start the job within {}",
                                                  where_, format_duration(options_.join_timeout * 2))};
    }
    pollfd p[2] = {{peer.link.fd(), POLLIN, 0}, {options_.interrupt_fd, POLLIN, 0}};
    poll_retry(p, 2, poll_timeout(now, start_deadline));
    if (auto error = interrupted(peer, terms)) return *error;
  }
}

std::optional<Error> JoinClient::interrupted(ControlPeer& peer, const StartTerms& terms) {
  const int sig = take_signal(options_.interrupt_fd);
  if (sig == 0) return std::nullopt;
  interrupted_by_ = sig;
  ControlMessage fail;
  fail.kind = ControlMessage::Kind::fail;
  fail.node_rank = terms.node_rank;
  fail.exit_code = 128 + sig;
  fail.name = options_.node_name;
  fail.text = fmt::format("was interrupted by {} while waiting for the start", signal_name(sig));
  send_message(peer, fail);
  return Error{ErrorKind::system,
               fmt::format("interrupted by {} while waiting for node 0's agent at {} to start the job",
                           signal_name(sig), where_)};
}

} // namespace air
