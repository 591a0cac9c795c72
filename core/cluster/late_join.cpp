// A node that joins later (c10d --nnodes MIN:MAX). Node 0 keeps the control
// port open while the ranks run; an agent that connects then goes through the
// same join gate as at the start (authentication, hello), and is admitted
// (`wait`) while the nodes, those waiting included, stay at most MAX. Its
// admission ends the attempt everywhere (`regroup`), as torchrun's agent
// restarts the workers when num_nodes_waiting() > 0, and agree_restart makes
// it the last node of the next attempt. A bad or surplus agent is refused
// alone: the running job never stops for it.
#include "core/cluster/control.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace air {

using Clock = std::chrono::steady_clock;

bool ControlChannel::admitting() const {
  return options_.node_rank == 0 && listener_ && running_ && !remote_ && !failure_reported_;
}

bool ControlChannel::late_hello_fits(Peer& p, const ControlMessage& hello) {
  const auto refuse = [&p](const std::string& text) {
    send_message(p, refuse_message(2, text));
    p.link.close();
    return false;
  };
  const int min_nodes = options_.min_nodes;
  if (hello.node_rank >= 0) {
    return refuse(fmt::format("the agent on {} uses static rendezvous but node 0 ({}) uses c10d: give every "
                              "node the same --rdzv-backend",
                              hello.name, options_.node_name));
  }
  if (hello.num_nodes != max_nodes_ || hello.ranks_per_node != options_.ranks_per_node) {
    return refuse(fmt::format(
        "the agent on {} was started for up to {} nodes of {} rank(s) but the running job "
        "has --nnodes {}:{} and {} rank(s) per node: give every node the same --nnodes "
        "and ranks per node",
        hello.name, hello.num_nodes, hello.ranks_per_node, min_nodes, max_nodes_, options_.ranks_per_node));
  }
  int nodes = 1 + static_cast<int>(waiting_.size());
  for (const auto& peer : peers_) nodes += peer->link.closed() ? 0 : 1;
  if (nodes >= max_nodes_) {
    return refuse(fmt::format("the job already has its {} nodes (--nnodes {}:{}); this agent ({}) was not "
                              "admitted",
                              max_nodes_, min_nodes, max_nodes_, hello.name));
  }
  return true;
}

std::optional<std::string> ControlChannel::hear_late(Peer& p, Clock::time_point now) {
  const JoinGate::Heard heard = late_gate_.hear(p, now);
  if (heard.state != JoinGate::Heard::State::hello || !late_hello_fits(p, heard.hello)) return std::nullopt;
  p.name = heard.hello.name;
  ControlMessage wait;
  wait.kind = ControlMessage::Kind::wait;
  if (!send_message(p, wait)) return std::nullopt;
  return heard.hello.name;
}

std::optional<RemoteFailure> ControlChannel::admit_late(Clock::time_point now) {
  late_gate_.accept(listener_.get(), late_, now);
  std::vector<std::string> joined;
  for (auto& p : late_) {
    if (auto name = hear_late(*p, now)) {
      joined.push_back(*name);
      waiting_.push_back(std::move(p));
    }
  }
  late_.erase(
      std::remove_if(late_.begin(), late_.end(), [](const auto& p) { return !p || p->link.closed(); }),
      late_.end());
  // A waiting agent says nothing until it starts; one that leaves (or is
  // interrupted: `fail`) is no longer waiting.
  for (auto& p : waiting_)
    for (const auto& line : p->link.read_lines())
      if (auto m = parse_control_message(line); m && m->kind == ControlMessage::Kind::fail) p->link.close();
  waiting_.erase(
      std::remove_if(waiting_.begin(), waiting_.end(), [](const auto& p) { return p->link.closed(); }),
      waiting_.end());
  if (joined.empty()) return std::nullopt;
  int nodes = 1 + static_cast<int>(waiting_.size());
  for (const auto& peer : peers_) nodes += peer->link.closed() ? 0 : 1;
  std::string names;
  for (const auto& name : joined) names += (names.empty() ? "" : ", ") + name;
  RemoteFailure change;
  change.node_rank = 0;
  change.node_name = options_.node_name;
  change.membership_change = true;
  change.reason = fmt::format("{} joined; the worker group restarts with {} nodes", names, nodes);
  return change;
}

void ControlChannel::refuse_waiting(int exit_code, const std::string& why) {
  send_to_all(waiting_, refuse_message(exit_code, why));
  waiting_.clear();
}

} // namespace air
