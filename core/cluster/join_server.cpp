// Node 0's side of the join barrier.
#include "core/cluster/join_server.hpp"

#include "core/base/duration.hpp"
#include "core/base/exit_status.hpp"
#include "core/os/signals.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace air {

namespace {

int min_nodes_of(const ControlOptions& o) { return o.c10d && o.min_nodes > 0 ? o.min_nodes : o.num_nodes; }

} // namespace

JoinServer::JoinServer(const ControlOptions& options)
    : options_(options), max_nodes_(options.num_nodes), min_nodes_(min_nodes_of(options)),
      deadline_(Clock::now() + options.join_timeout),
      gate_(JoinSecret{options.join_token, options.job_id}, JoinGate::Mode::join) {}

bool JoinServer::enough() {
  // c10d with MIN:MAX: once MIN nodes are in, wait last_call_timeout for more (torchrun's last call).
  const int present = static_cast<int>(joined_.size()) + 1;
  if (present >= max_nodes_) return true;
  if (present < min_nodes_) return false;
  if (!last_call_) last_call_ = Clock::now() + options_.last_call_timeout;
  return Clock::now() >= *last_call_;
}

Error JoinServer::refuse_all(int code, const std::string& message, ControlPeer* also) {
  const ControlMessage m = refuse_message(code, message);
  for (auto& [rank, peer] : joined_) send_message(*peer, m);
  if (also) send_message(*also, m);
  return refusal_error(code, message);
}

Error JoinServer::timed_out() {
  const std::string refused = gate_.refused().empty() ? "" : "; refused a connection: " + gate_.refused();
  if (options_.c10d) {
    return refuse_all(125,
                      fmt::format("only {} of at least {} nodes joined within {} (node 0's agent waited on "
                                  "port {}){}",
                                  joined_.size() + 1, min_nodes_, format_duration(options_.join_timeout),
                                  options_.port, refused),
                      nullptr);
  }
  std::string missing;
  int count = 0;
  for (int r = 1; r < options_.num_nodes; ++r) {
    if (joined_.count(r) != 0) continue;
    if (count++ < 8) missing += (missing.empty() ? "" : ", ") + node_label(options_, r, "");
  }
  if (count > 8) missing += fmt::format(" and {} more", count - 8);
  return refuse_all(125,
                    fmt::format("{} did not join within {} (node 0's agent waited on control port {}){}",
                                missing, format_duration(options_.join_timeout), options_.port, refused),
                    nullptr);
}

std::optional<Error> JoinServer::wait_once(const UniqueFd& listener) {
  const auto now = Clock::now();
  // fd -1: poll passes over the listener while it rests.
  const bool resting = gate_.resting(now);
  std::vector<pollfd> fds{{resting ? -1 : listener.get(), POLLIN, 0}, {options_.interrupt_fd, POLLIN, 0}};
  for (auto& p : pending_) fds.push_back({p->link.fd(), POLLIN, 0});
  for (auto& [rank, p] : joined_) fds.push_back({p->link.fd(), POLLIN, 0});
  // Wake at least every second while connections wait, to drop silent ones.
  const auto wake = last_call_ ? std::min(deadline_, *last_call_) : deadline_;
  int wait_ms = pending_.empty() ? poll_timeout(now, wake) : std::min(poll_timeout(now, wake), 1000);
  if (resting) wait_ms = std::min(wait_ms, poll_timeout(now, gate_.resumes()));
  if (poll_retry(fds.data(), fds.size(), wait_ms) < 0)
    return refuse_all(125, std::string("poll (control join): ") + std::strerror(errno), nullptr);
  if (const int sig = take_signal(options_.interrupt_fd); sig != 0) {
    interrupted_by_ = sig;
    return refuse_all(128 + sig,
                      fmt::format("node 0's agent was interrupted by {} while waiting for the other nodes",
                                  signal_name(sig)),
                      nullptr);
  }
  if (fds[0].revents != 0) gate_.accept(listener.get(), pending_, Clock::now());
  return std::nullopt;
}

std::optional<Error> JoinServer::hear_joined() {
  // A joined agent that goes away before the start is a node lost before it began.
  for (auto& [rank, p] : joined_) {
    for (const auto& line : p->link.read_lines()) {
      // A joined agent that is interrupted before the start says so.
      auto m = parse_control_message(line);
      if (m && m->kind == ControlMessage::Kind::fail) {
        if (m->exit_code > 128 && m->exit_code < 128 + 65) interrupted_by_ = m->exit_code - 128;
        return refuse_all(m->exit_code, fmt::format("{} {}", node_label(options_, rank, p->name), m->text),
                          nullptr);
      }
    }
    if (p->link.closed()) {
      return refuse_all(125,
                        fmt::format("{} left before the start (its agent closed the control connection)",
                                    node_label(options_, rank, p->name)),
                        nullptr);
    }
  }
  return std::nullopt;
}

Expected<bool> JoinServer::take_hello(std::unique_ptr<ControlPeer>& p, const ControlMessage& hello) {
  if (options_.c10d != (hello.node_rank < 0)) {
    return refuse_all(2,
                      fmt::format("the agent on {} uses {} rendezvous but node 0 ({}) uses {}: give every "
                                  "node the same --rdzv-backend",
                                  hello.name, hello.node_rank < 0 ? "c10d" : "static", options_.node_name,
                                  options_.c10d ? "c10d" : "static"),
                      p.get());
  }
  if (options_.c10d && static_cast<int>(joined_.size()) + 1 >= max_nodes_) {
    send_message(*p, refuse_message(2, fmt::format("the job already has its {} nodes", max_nodes_)));
    p->link.close();
    return false;
  }
  // c10d: node ranks in order of arrival, node 0 being the host.
  const int r = options_.c10d ? static_cast<int>(joined_.size()) + 1 : hello.node_rank;
  p->node_rank = r;
  p->name = hello.name;
  const std::string who = node_label(options_, r, hello.name);
  const std::string node0 = node_label(options_, 0, "");
  if (r < 1 || r >= options_.num_nodes) {
    return refuse_all(2,
                      fmt::format("an agent on {} says it is node {}, outside 1..{} ({} nodes)", hello.name,
                                  r, options_.num_nodes - 1, options_.num_nodes),
                      p.get());
  }
  if (hello.num_nodes != options_.num_nodes) {
    return refuse_all(
        2,
        fmt::format("{} was started for {} nodes but {} for {}: give every node the same --nnodes", who,
                    hello.num_nodes, node0, options_.num_nodes),
        p.get());
  }
  if (auto other = joined_.find(r); other != joined_.end()) {
    return refuse_all(2,
                      fmt::format("two agents say they are node {}: {} and {}; give each node its own "
                                  "--node-rank",
                                  r, other->second->name, hello.name),
                      p.get());
  }
  if (hello.ranks_per_node != options_.ranks_per_node) {
    return refuse_all(2,
                      fmt::format("{} runs {} rank(s) but {} runs {}: every node must run the same number "
                                  "of ranks (--num-accelerators / --cpu-ranks)",
                                  who, hello.ranks_per_node, node0, options_.ranks_per_node),
                      p.get());
  }
  joined_.emplace(r, std::move(p));
  return true;
}

Expected<ControlPeers> JoinServer::send_start() {
  ControlMessage start;
  start.kind = ControlMessage::Kind::start;
  start.text = options_.run_id;
  start.num_nodes = static_cast<int>(joined_.size()) + 1;
  start.master_port = options_.master_port;
  start.mlflow_experiment_id = options_.mlflow_experiment_id;
  start.mlflow_run_id = options_.mlflow_run_id;
  for (auto& [rank, peer] : joined_) {
    start.node_rank = rank;
    if (!send_message(*peer, start))
      return refuse_all(125, fmt::format("{} left before the start", node_label(options_, rank, peer->name)),
                        nullptr);
  }
  ControlPeers peers;
  for (auto& [rank, peer] : joined_) peers.push_back(std::move(peer));
  joined_.clear();
  return peers;
}

Expected<ControlPeers> JoinServer::run(const UniqueFd& listener) {
  while (!enough()) {
    if (Clock::now() >= deadline_) return timed_out();
    if (auto error = wait_once(listener)) return *error;
    if (auto error = hear_joined()) return *error;
    const auto now = Clock::now();
    for (auto& p : pending_) {
      const JoinGate::Heard heard = gate_.hear(*p, now);
      if (heard.state != JoinGate::Heard::State::hello) continue;
      const Expected<bool> taken = take_hello(p, heard.hello);
      if (!taken) return taken.error();
    }
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                  [](const auto& p) { return !p || p->link.closed(); }),
                   pending_.end());
  }
  return send_start();
}

} // namespace air
