// The agreement between attempts: every node says whether it may restart
// (`over`), node 0 answers all with `restart ATTEMPT PORT` or `stop`.
#include "core/base/exit_status.hpp"
#include "core/cluster/control.hpp"
#include "core/os/signals.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace air {

using Clock = std::chrono::steady_clock;

std::optional<int> ControlChannel::agree_restart(RunOutcome& outcome, bool restartable, int attempt,
                                                 int master_port) {
  const bool server = options_.node_rank == 0;
  if (!server) {
    ControlMessage over;
    over.kind = ControlMessage::Kind::over;
    over.node_rank = options_.node_rank;
    over.restartable = restartable;
    send_to_all(peers_, over);
  }
  RestartWords words;
  words.said = std::move(early_over_);
  early_over_.clear();
  gather_restart_words(outcome, restartable, attempt, words);
  if (server) {
    // Elastic: the nodes that are gone leave the group; the rest must be enough.
    bool regroup = false;
    if (elastic() && !words.lost && !drop_lost_nodes(outcome, regroup)) words.lost = true;
    const bool all =
        !words.lost && restartable && std::all_of(peers_.begin(), peers_.end(), [&words](const auto& p) {
          const auto it = words.said.find(p->node_rank);
          return it != words.said.end() && it->second;
        });
    send_restart_answer(all, regroup, attempt, master_port);
    if (all) words.port = master_port;
  }
  if (!words.port) return std::nullopt;
  begin_attempt(*words.port);
  return words.port;
}

void ControlChannel::hear_restart_words(Peer& peer, RestartWords& words) {
  // Lines from the attempt that just ended (fail, abort, done) come first on
  // each connection and are passed over.
  const bool server = options_.node_rank == 0;
  const std::vector<std::string> lines = peer.link.read_lines();
  for (std::size_t i = 0; i < lines.size() && !words.decided; ++i) {
    auto m = parse_control_message(lines[i]);
    if (!m) continue;
    if (server && m->kind == ControlMessage::Kind::over && speaks_for_itself(peer, *m))
      words.said[peer.node_rank] = m->restartable;
    if (!server && m->kind == ControlMessage::Kind::restart) {
      words.decided = true;
      words.port = m->master_port;
      if (m->node_rank > 0) { // node 0 regrouped the nodes after one was lost
        options_.node_rank = m->node_rank;
        options_.num_nodes = m->num_nodes;
      }
    }
    if (!server && m->kind == ControlMessage::Kind::stop) words.decided = true;
    // Node 0 may already be in the next attempt: what follows its answer
    // (an abort of a rank that failed at once) belongs to that attempt.
    if (words.decided)
      peer.link.keep_unread({lines.begin() + static_cast<std::ptrdiff_t>(i) + 1, lines.end()});
  }
}

void ControlChannel::gather_restart_words(RunOutcome& outcome, bool& restartable, int attempt,
                                          RestartWords& words) {
  const bool server = options_.node_rank == 0;
  auto next_hb = Clock::now();
  while (!words.decided && !words.lost) {
    const auto now = Clock::now();
    if (now >= next_hb) {
      send_to_all(peers_, ControlMessage{});
      next_hb = now + options_.heartbeat_interval;
    }
    for (auto& peer : peers_) {
      hear_restart_words(*peer, words);
      const bool silent = now - peer->link.last_heard() > options_.heartbeat_timeout;
      if ((peer->link.closed() || silent) && !(server && words.said.count(peer->node_rank) != 0)) {
        if (server && elastic())
          peer->link.close(); // dropped later: the others go on without it
        else
          words.lost = true;
      }
    }
    if (server && std::all_of(peers_.begin(), peers_.end(), [&words](const auto& p) {
          return p->link.closed() || words.said.count(p->node_rank) != 0;
        }))
      break;
    if (words.decided || words.lost) break;
    std::vector<pollfd> fds{{options_.interrupt_fd, POLLIN, 0}};
    for (const int fd : poll_fds()) fds.push_back({fd, POLLIN, 0});
    poll_retry(fds.data(), fds.size(), poll_timeout(Clock::now(), next_hb));
    if (const int sig = take_signal(options_.interrupt_fd); sig != 0) {
      interrupted_by_ = sig;
      outcome.status = RunOutcome::Status::interrupted;
      outcome.interrupt_signal = sig;
      outcome.remote_failure.reset();
      outcome.reason = fmt::format("interrupted by {} before restart {}", signal_name(sig), attempt);
      restartable = false;
      words.lost = true; // closing tells the others (node 0 sees a node gone; node 0 gone ends the rest)
    }
  }
}

bool ControlChannel::drop_lost_nodes(RunOutcome& outcome, bool& regroup) {
  const auto gone =
      std::remove_if(peers_.begin(), peers_.end(), [](const auto& p) { return p->link.closed(); });
  regroup = gone != peers_.end();
  peers_.erase(gone, peers_.end());
  const int left = static_cast<int>(peers_.size()) + 1;
  if (!regroup || left >= options_.min_nodes) return true;
  outcome.reason += fmt::format("; {} node{} left, fewer than the {} --nnodes asks for", left,
                                left == 1 ? "" : "s", options_.min_nodes);
  return false;
}

void ControlChannel::send_restart_answer(bool all, bool regroup, int attempt, int master_port) {
  // The agents waiting to join (admit_late) become the last nodes of the
  // next attempt; when there is none, they are told the job ends.
  std::vector<const Peer*> joining;
  if (all) {
    for (auto& peer : waiting_) {
      if (peer->link.closed()) continue;
      peer->link.heard_at(Clock::now()); // it waited in silence: its heartbeats start now
      joining.push_back(peer.get());
      peers_.push_back(std::move(peer));
      regroup = true;
    }
    waiting_.clear();
  } else {
    refuse_waiting(125, "the job ended before a restart could admit this node");
  }
  ControlMessage m;
  m.kind = all ? ControlMessage::Kind::restart : ControlMessage::Kind::stop;
  m.attempt = attempt;
  m.master_port = master_port;
  if (all && regroup) options_.num_nodes = static_cast<int>(peers_.size()) + 1;
  int next_rank = 1;
  for (auto& peer : peers_) {
    if (peer->link.closed()) continue;
    if (all && regroup) { // contiguous again, in the old order, those joining last
      peer->node_rank = next_rank++;
      m.node_rank = peer->node_rank;
      m.num_nodes = options_.num_nodes;
    }
    if (std::find(joining.begin(), joining.end(), peer.get()) != joining.end()) {
      // A joining agent learns the run first, as at the start; `restart` then names its attempt.
      ControlMessage start;
      start.kind = ControlMessage::Kind::start;
      start.node_rank = peer->node_rank;
      start.num_nodes = options_.num_nodes;
      start.master_port = master_port;
      start.text = run_id_;
      start.mlflow_experiment_id = mlflow_experiment_id_;
      start.mlflow_run_id = mlflow_run_id_;
      send_message(*peer, start);
    }
    send_message(*peer, m);
  }
  if (all) send_members(); // the next attempt's nodes, after `restart` on each connection
}

void ControlChannel::begin_attempt(int master_port) {
  failure_reported_ = false;
  remote_.reset();
  finished_ = false;
  settled_ = false;
  master_port_ = master_port;
  running_ = true;
  for (auto& peer : peers_) peer->done = false;
  stop_ends_ = StopEnds();
}

} // namespace air
