// The multi-node control channel: what one agent's connections carry while
// its ranks run (failure fan-out, heartbeats, the final agreement, the
// job-wide hang and stop decisions). The join, the restart agreement and late
// join live in their own files (docs/development.md, "The run-time half").
#include "core/cluster/control.hpp"

#include "core/base/duration.hpp"
#include "core/cluster/join_client.hpp"
#include "core/cluster/join_server.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

namespace air {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

/// How long closing waits for the peer's own close, so no unread byte turns
/// our close into a reset that could eat the last message.
constexpr milliseconds k_linger{2'000};

/// How long node 0 waits, past the grace period, for the other nodes' word
/// at the end of a stop across nodes (ControlChannel::end_stop).
constexpr milliseconds k_stop_end_margin{10'000};

/// The names of a `nodes` line.
std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t space = text.find(' ', at);
    const std::size_t end = space == std::string::npos ? text.size() : space;
    if (end > at) names.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return names;
}

/// A node's name as one word of a `nodes` line.
std::string one_name(const std::string& name) {
  std::string out = name.empty() ? "?" : name;
  for (char& c : out)
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') c = '_';
  return out;
}

/// Writes a failure elsewhere into this node's outcome, so it exits with that node's code.
void adopt(RunOutcome& outcome, const RemoteFailure& failure) {
  outcome.status = failure.hung ? RunOutcome::Status::hung : RunOutcome::Status::failed;
  outcome.root_cause_rank = -1;
  outcome.reason = remote_failure_reason(failure);
  outcome.remote_failure = failure;
}

/// A failure as the line that carries it: `fail` towards node 0, `abort` from it.
ControlMessage failure_message(ControlMessage::Kind kind, const RemoteFailure& failure) {
  ControlMessage m;
  m.kind = kind;
  m.node_rank = failure.node_rank;
  m.rank = failure.rank;
  m.exit_code = failure.exit_code;
  m.name = failure.node_name;
  m.text = failure.reason;
  return m;
}

/// A `preempt` or `counted` line's counts.
NodeSteps steps_of(const ControlMessage& m) {
  NodeSteps n;
  n.node = m.node_rank;
  n.polling = m.count;
  n.steps = m.steps;
  n.rate = static_cast<double>(m.rate_milli) / 1000;
  return n;
}

/// A rate in steps per 1000 s, as the lines carry it.
std::uint64_t rate_milli(double rate) {
  if (!(rate > 0)) return 0;
  return static_cast<std::uint64_t>(std::min(rate, 1e9) * 1000);
}

/// Whether a message from an agent to node 0 names the node it comes from
/// (`fail NODE ...`, `done NODE`, `place ROUND NODE ...`): the kinds an agent
/// sends, and `abort` and `hung`, which node 0 would take as a failure too.
bool names_a_node(ControlMessage::Kind kind) {
  using Kind = ControlMessage::Kind;
  switch (kind) {
  case Kind::fail:
  case Kind::abort:
  case Kind::hung:
  case Kind::done:
  case Kind::over:
  case Kind::quiet:
  case Kind::place:
  case Kind::work:
  case Kind::preempt:
  case Kind::counted:
  case Kind::stopped:
    return true;
  default:
    return false;
  }
}

} // namespace

std::string node_plain_name(const ControlOptions& options, int node_rank, const std::string& said) {
  std::string name = said == "?" ? "" : said;
  if (node_rank >= 0 && static_cast<std::size_t>(node_rank) < options.node_names.size())
    name = options.node_names[static_cast<std::size_t>(node_rank)];
  if (node_rank == options.node_rank) name = options.node_name;
  return name;
}

std::string node_label(const ControlOptions& options, int node_rank, const std::string& said) {
  const std::string name = node_plain_name(options, node_rank, said);
  return name.empty() ? fmt::format("node {}", node_rank) : fmt::format("node {} ({})", node_rank, name);
}

ControlChannel::ControlChannel(ControlOptions options)
    : options_(std::move(options)), run_id_(options_.run_id),
      mlflow_experiment_id_(options_.mlflow_experiment_id), mlflow_run_id_(options_.mlflow_run_id),
      max_nodes_(options_.num_nodes),
      late_gate_(JoinSecret{options_.join_token, options_.job_id}, JoinGate::Mode::late) {}

ControlChannel::~ControlChannel() = default;

Expected<std::unique_ptr<ControlChannel>> ControlChannel::join(const ControlOptions& options,
                                                               int* interrupted_by) {
  std::unique_ptr<ControlChannel> channel(new ControlChannel(options));
  channel->master_port_ = options.master_port;
  UniqueFd listener;
  const auto listen = [&options](bool* in_use) -> Expected<UniqueFd> {
    auto bound = listen_tcp(options.port, "control port", in_use);
    if (!bound && *in_use) {
      return usage_error(fmt::format("control port {} is already in use on this node; choose another with "
                                     "--control-port (default: master port + 1) on every node",
                                     options.port));
    }
    return bound;
  };
  if (options.c10d) {
    // The first agent to bind the endpoint's port hosts the join and is node 0.
    channel->options_.node_rank = -1;
    if (options.may_host) {
      bool in_use = false;
      auto bound = listen(&in_use);
      if (bound) {
        listener = std::move(*bound);
        channel->options_.node_rank = 0;
      } else if (!in_use) {
        return bound.error();
      }
    }
  } else if (options.node_rank == 0) {
    bool in_use = false;
    auto bound = listen(&in_use);
    if (!bound) return bound.error();
    listener = std::move(*bound);
  }
  const Status joined = listener ? channel->serve_join(std::move(listener)) : channel->client_join();
  if (interrupted_by != nullptr) *interrupted_by = channel->interrupted_by_;
  if (!joined) return joined.error();
  const auto now = Clock::now();
  for (auto& peer : channel->peers_) peer->link.heard_at(now);
  channel->next_heartbeat_ = now + options.heartbeat_interval;
  channel->running_ = true;
  return channel;
}

Status ControlChannel::serve_join(UniqueFd listener) {
  JoinServer server(options_);
  auto joined = server.run(listener);
  interrupted_by_ = server.interrupted_by();
  if (!joined) return joined.error();
  peers_ = std::move(*joined);
  options_.num_nodes = static_cast<int>(peers_.size()) + 1;
  send_members();
  // Elastic: node 0 keeps listening, so an agent that comes later is admitted
  // at the next restart (admit_late); otherwise the listener closes here.
  if (elastic()) listener_ = std::move(listener);
  return ok_status();
}

Status ControlChannel::client_join() {
  StartTerms terms{
      run_id_, options_.node_rank, options_.num_nodes, master_port_, mlflow_experiment_id_, mlflow_run_id_,
      0};
  JoinClient client(options_);
  auto peer = client.run(terms);
  interrupted_by_ = client.interrupted_by();
  if (!peer) return peer.error();
  run_id_ = terms.run_id;
  options_.node_rank = terms.node_rank;
  options_.num_nodes = terms.num_nodes;
  master_port_ = terms.master_port;
  mlflow_experiment_id_ = terms.mlflow_experiment_id;
  mlflow_run_id_ = terms.mlflow_run_id;
  first_attempt_ = terms.first_attempt;
  peers_.push_back(std::move(*peer));
  return ok_status();
}

bool ControlChannel::others_may_tell() const {
  return std::any_of(peers_.begin(), peers_.end(), [](const auto& peer) { return !peer->link.closed(); });
}

std::vector<int> ControlChannel::poll_fds() const {
  std::vector<int> fds;
  for (const auto& peer : peers_)
    if (!peer->link.closed()) fds.push_back(peer->link.fd());
  if (admitting()) {
    if (!late_gate_.resting(Clock::now())) fds.push_back(listener_.get());
    for (const auto& group : {&late_, &waiting_})
      for (const auto& peer : *group)
        if (!peer->link.closed()) fds.push_back(peer->link.fd());
  }
  return fds;
}

std::optional<Clock::time_point> ControlChannel::next_deadline() const {
  std::optional<Clock::time_point> next = next_heartbeat_;
  for (const auto round_ends : {hang_round_.deadline(), stop_round_.deadline()})
    if (round_ends && *round_ends < *next) next = round_ends;
  for (const auto& peer : peers_) {
    if (peer->link.closed()) continue;
    const auto silent = peer->link.last_heard() + options_.heartbeat_timeout;
    if (silent < *next) next = silent;
  }
  return next;
}

std::vector<JobEvent> ControlChannel::check(Clock::time_point now) {
  const auto failure = pump(now);
  std::vector<JobEvent> events;
  due_preemption(now, events);
  if (failure) events.push_back(JobEvent::failed_with(*failure));
  due_hang(now, events);
  return events;
}

std::vector<JobEvent> ControlChannel::tell(const NodeEvent& event, Clock::time_point now) {
  switch (event.kind) {
  case NodeEvent::Kind::failed:
    if (event.outcome) local_failure(*event.outcome);
    break;
  case NodeEvent::Kind::quiet:
    ranks_quiet();
    break;
  case NodeEvent::Kind::placed:
    ranks_placed(event.places);
    break;
  case NodeEvent::Kind::no_hang:
    job_not_hung();
    break;
  case NodeEvent::Kind::preempted:
    preempt_signalled(event.signal, event.steps, event.grace);
    break;
  case NodeEvent::Kind::counted:
    ranks_counted(event.steps);
    break;
  }
  std::vector<JobEvent> events;
  due_preemption(now, events);
  due_hang(now, events);
  return events;
}

void ControlChannel::due_preemption(Clock::time_point now, std::vector<JobEvent>& events) {
  if (counts_asked()) events.push_back(JobEvent::of(JobEvent::Kind::counts_asked));
  if (auto stop = job_stop(now)) events.push_back(JobEvent::stop_at(std::move(*stop)));
}

void ControlChannel::due_hang(Clock::time_point now, std::vector<JobEvent>& events) {
  if (std::exchange(not_hung_, false)) events.push_back(JobEvent::of(JobEvent::Kind::not_hung));
  if (places_asked()) events.push_back(JobEvent::of(JobEvent::Kind::places_asked));
  if (auto job = job_places(now)) events.push_back(JobEvent::places_of(std::move(*job)));
}

std::optional<RemoteFailure> ControlChannel::lost(Peer& peer, bool was_closed, Clock::time_point now) {
  if (was_closed) return std::nullopt;
  // A peer that is gone before the end: its agent exited or was killed.
  const bool expected_end = options_.node_rank == 0 ? peer.done : finished_;
  std::string why;
  if (peer.link.closed() && !expected_end) {
    why = "its agent closed the control connection (it exited or was killed)";
  } else if (!peer.link.closed() && now - peer.link.last_heard() > options_.heartbeat_timeout) {
    why = fmt::format("no word from its agent for {}", format_duration(options_.heartbeat_timeout));
    peer.link.close();
  }
  if (why.empty()) return std::nullopt;
  RemoteFailure f;
  // Woken from a freeze the others took for a loss: a peer lost now (its
  // connection closed, or silent since: what was buffered is read first) is
  // this node's own absence, within a timeout of waking.
  if (frozen_for_ > Clock::duration::zero() &&
      now - woke_at_ <= options_.heartbeat_timeout + options_.heartbeat_interval) {
    // This agent was the silent one (frozen, its machine paused): the others
    // counted it as lost and went on, so it names itself, not the peer it
    // finds gone on waking.
    f.node_rank = options_.node_rank;
    f.node_name = node_plain_name(options_, options_.node_rank, options_.node_name);
    f.exit_code = 1;
    f.reason =
        fmt::format("its agent was frozen for {}, past the heartbeat timeout: the other nodes lost it",
                    format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(frozen_for_)));
    return f;
  }
  f.node_rank = peer.node_rank;
  f.node_name = node_plain_name(options_, peer.node_rank, peer.name);
  f.exit_code = 1;
  f.reason = why;
  return f;
}

std::optional<RemoteFailure> ControlChannel::pump(Clock::time_point now) {
  // The supervisor passes here at least once a second (heartbeats are due
  // every second): a gap past the heartbeat timeout is this agent's own.
  // The others count this node lost once its last heartbeat is a timeout
  // old: that heartbeat may have gone out up to an interval after its last
  // pass, so a silence of (timeout - interval) may already have done it.
  const auto silence = last_pump_ == Clock::time_point{} ? Clock::duration::zero() : now - last_pump_;
  last_pump_ = now;
  const auto counted_lost =
      std::max(options_.heartbeat_timeout - options_.heartbeat_interval, options_.heartbeat_timeout / 2);
  if (silence > counted_lost) {
    frozen_for_ = silence;
    woke_at_ = now;
  }
  std::optional<RemoteFailure> failure;
  const bool server = options_.node_rank == 0;
  for (auto& peer : peers_) {
    const bool was_closed = peer->link.closed();
    for (const auto& line : peer->link.read_lines()) {
      auto m = parse_control_message(line);
      if (!m) continue; // a newer agent's message this one does not know: ignore it
      auto f = server ? on_agent_line(*peer, *m) : on_node0_line(*m);
      if (f && !failure) failure = std::move(f);
    }
    // Checked even when a failure is at hand: a silent peer is marked closed.
    auto gone = lost(*peer, was_closed, now);
    if (gone && !failure) failure = std::move(gone);
  }
  if (server && admitting()) {
    auto joined = admit_late(now);
    if (joined && !failure) failure = std::move(joined);
  }
  if (now >= next_heartbeat_) {
    send_to_all(peers_, ControlMessage{});
    next_heartbeat_ = now + options_.heartbeat_interval;
  }
  // Only the first failure anywhere counts, and not after this node's own.
  if (!failure || remote_ || failure_reported_) return std::nullopt;
  remote_ = failure;
  if (server) {
    const Peer* origin = nullptr;
    for (const auto& peer : peers_)
      if (peer->node_rank == failure->node_rank) origin = peer.get();
    broadcast_abort(*failure, origin);
  }
  return failure;
}

bool ControlChannel::speaks_for_itself(Peer& peer, const ControlMessage& m) {
  if (!names_a_node(m.kind) || m.node_rank == peer.node_rank) return true;
  // A token holder could otherwise fail, hang or stop the job in another
  // node's name: the connection's node rank is the one its hello earned.
  if (!std::exchange(peer.violation_told, true) && options_.notice) {
    const std::string line = format_control_message(m);
    options_.notice(fmt::format("protocol violation: {} sent a message naming node {}, ignored: {}",
                                node_label(options_, peer.node_rank, peer.name), m.node_rank,
                                line.substr(0, std::min<std::size_t>(line.size() - 1, 200))));
  }
  return false;
}

RemoteFailure ControlChannel::failure_of(const ControlMessage& m) const {
  RemoteFailure f;
  f.node_rank = m.node_rank;
  f.node_name = node_plain_name(options_, m.node_rank, m.name);
  f.rank = m.rank;
  f.exit_code = m.exit_code;
  f.reason = m.text;
  f.hung = m.kind == ControlMessage::Kind::hung;
  return f;
}

std::optional<RemoteFailure> ControlChannel::on_agent_line(Peer& peer, const ControlMessage& m) {
  if (!speaks_for_itself(peer, m)) return std::nullopt;
  const auto now = Clock::now();
  switch (m.kind) {
  case ControlMessage::Kind::done:
    peer.done = true;
    return std::nullopt;
  case ControlMessage::Kind::over:
    // A node whose attempt ended first says whether it may restart while this
    // one is still stopping its ranks: kept for agree_restart.
    early_over_[peer.node_rank] = m.restartable;
    return std::nullopt;
  case ControlMessage::Kind::quiet:
    if (!hang_round_.gathering()) start_round(now);
    return std::nullopt;
  case ControlMessage::Kind::place:
    // Only this round's, and only up to the count the node gave.
    hang_round_.take_place(m.round, m.node_rank, m.count, m.place);
    return std::nullopt;
  case ControlMessage::Kind::work:
    hang_round_.take_work(m.round, m.node_rank, m.place.rank, m.place.working, m.place.exited_ok);
    return std::nullopt;
  case ControlMessage::Kind::preempt:
    // Only while its ranks run (after the end that node is on its own fallback anyway).
    if (running_) {
      stop_round_.take(m.node_rank, steps_of(m), std::nullopt, now);
      start_preemption(m.signal, m.node_rank, std::chrono::milliseconds(m.grace_ms), now);
    }
    return std::nullopt;
  case ControlMessage::Kind::counted:
    if (stop_round_.gathering())
      stop_round_.take(m.node_rank, steps_of(m), (now - stop_round_.asked_at()) / 2, now);
    return std::nullopt;
  case ControlMessage::Kind::stopped:
    stop_ends_.take(m.node_rank, m.count, m.stopped); // a fast node's may come before node 0's own end
    return std::nullopt;
  case ControlMessage::Kind::fail:
  case ControlMessage::Kind::abort:
  case ControlMessage::Kind::hung:
    return failure_of(m);
  default:
    return std::nullopt;
  }
}

std::optional<RemoteFailure> ControlChannel::on_node0_line(const ControlMessage& m) {
  switch (m.kind) {
  case ControlMessage::Kind::finish:
    finished_ = true;
    return std::nullopt;
  case ControlMessage::Kind::nodes:
    members_ = split_names(m.text);
    return std::nullopt;
  case ControlMessage::Kind::regroup: {
    RemoteFailure f;
    f.node_rank = 0;
    f.node_name = members_.empty() ? node_plain_name(options_, 0, "") : members_.front();
    f.reason = m.text;
    f.membership_change = true;
    return f;
  }
  case ControlMessage::Kind::where:
    if (m.round > asked_round_) {
      asked_round_ = m.round;
      places_asked_ = true;
    }
    return std::nullopt;
  case ControlMessage::Kind::busy:
    // Only the verdict on the places this node sent last, and not once a new
    // quiet spell of its own went out since (the verdict crossed it).
    if (m.round == answered_round_ && !quiet_unanswered_) not_hung_ = true;
    return std::nullopt;
  case ControlMessage::Kind::count:
    counts_asked_ = true;
    return std::nullopt;
  case ControlMessage::Kind::stopat:
    if (!job_stop_ && !stop_heard_) {
      stop_heard_ = true; // the first decision counts
      JobStop stop;
      stop.signal = m.signal;
      stop.stop_step = m.steps;
      stop.grace = std::chrono::milliseconds(m.grace_ms);
      stop.node = m.node_rank;
      job_stop_ = std::move(stop);
    }
    return std::nullopt;
  case ControlMessage::Kind::fail:
  case ControlMessage::Kind::abort:
  case ControlMessage::Kind::hung: {
    if (m.node_rank == options_.node_rank) return std::nullopt; // our own failure, echoed
    return failure_of(m);
  }
  default:
    return std::nullopt;
  }
}

void ControlChannel::send_members() {
  members_.assign(1, options_.node_name);
  for (const auto& peer : peers_) members_.push_back(peer->name);
  ControlMessage m;
  m.kind = ControlMessage::Kind::nodes;
  for (const auto& name : members_) m.text += (m.text.empty() ? "" : " ") + one_name(name);
  send_to_all(peers_, m);
}

void ControlChannel::broadcast_abort(const RemoteFailure& failure, const Peer* except) {
  ControlMessage m = failure_message(ControlMessage::Kind::abort, failure);
  if (failure.membership_change) { // not a failure: the others end the attempt for the restart
    m.kind = ControlMessage::Kind::regroup;
    m.text = failure.reason;
  }
  // A hang stop says `hung` first; the `abort` after it stops an agent that
  // does not know `hung` (the first failure a node hears is the one it keeps).
  if (hang_stop_) send_to_all(peers_, failure_message(ControlMessage::Kind::hung, failure), except);
  send_to_all(peers_, m, except);
}

void ControlChannel::report_failure(int exit_code, int rank, const std::string& reason) {
  if (failure_reported_ || remote_) return;
  failure_reported_ = true;
  RemoteFailure mine;
  mine.node_rank = options_.node_rank;
  mine.node_name = options_.node_name;
  mine.rank = rank;
  mine.exit_code = exit_code == 0 ? 1 : exit_code;
  mine.reason = reason;
  if (options_.node_rank == 0) {
    broadcast_abort(mine, nullptr);
    return;
  }
  send_to_all(peers_, failure_message(ControlMessage::Kind::fail, mine));
}

void ControlChannel::local_failure(const RunOutcome& outcome) {
  // Node 0 stopping for a hang stops the others as hung, not as failed.
  hang_stop_ = options_.node_rank == 0 && outcome.status == RunOutcome::Status::hung;
  report_failure(outcome.exit_code(), outcome.root_cause_rank, outcome.reason);
}

void ControlChannel::start_round(Clock::time_point now) {
  ControlMessage where;
  where.kind = ControlMessage::Kind::where;
  where.round = hang_round_.start(now, options_.places_wait);
  places_asked_ = true; // node 0's own ranks too
  send_to_all(peers_, where);
}

void ControlChannel::ranks_quiet() {
  if (options_.node_rank == 0) {
    if (!hang_round_.gathering()) start_round(Clock::now());
    return;
  }
  ControlMessage quiet;
  quiet.kind = ControlMessage::Kind::quiet;
  quiet.node_rank = options_.node_rank;
  send_to_all(peers_, quiet);
  quiet_unanswered_ = true;
}

bool ControlChannel::places_asked() { return std::exchange(places_asked_, false); }

void ControlChannel::ranks_placed(const std::vector<HangRank>& ranks) {
  if (options_.node_rank == 0) {
    // Outside a round, a diagnosis of node 0's own: the round that follows asks again.
    hang_round_.take_places(0, ranks);
    return;
  }
  if (asked_round_ <= answered_round_) return; // not asked (yet): `where` comes after our `quiet`
  answered_round_ = asked_round_;
  quiet_unanswered_ = false;
  for (const HangRank& rank : ranks) {
    // How it worked first: node 0 has it when the place completes the node.
    ControlMessage work;
    work.kind = ControlMessage::Kind::work;
    work.round = asked_round_;
    work.node_rank = options_.node_rank;
    work.place.rank = rank.rank;
    work.place.working = rank.working;
    work.place.exited_ok = rank.exited_ok;
    send_to_all(peers_, work);
    ControlMessage place;
    place.kind = ControlMessage::Kind::place;
    place.round = asked_round_;
    place.node_rank = options_.node_rank;
    place.count = static_cast<int>(ranks.size());
    place.place = rank;
    send_to_all(peers_, place);
  }
}

std::vector<int> ControlChannel::awaited_nodes() const {
  std::vector<int> nodes{0};
  for (const auto& peer : peers_)
    if (!peer->link.closed()) nodes.push_back(peer->node_rank);
  return nodes;
}

std::optional<JobPlaces> ControlChannel::job_places(Clock::time_point now, bool self_done) {
  if (options_.node_rank != 0) return std::nullopt;
  // A node whose ranks all exited 0 has no supervisor left to answer: its
  // ranks count as finished, and the round does not wait for it.
  std::vector<int> awaited, done;
  (self_done ? done : awaited).push_back(0);
  for (const auto& peer : peers_) {
    if (peer->done)
      done.push_back(peer->node_rank);
    else if (!peer->link.closed())
      awaited.push_back(peer->node_rank);
  }
  return hang_round_.complete(awaited, options_.num_nodes, now, done);
}

void ControlChannel::judge_quiet_while_done(Clock::time_point now) {
  if (!hang_round_.gathering()) return;
  const auto job = job_places(now, true);
  // A hang is left to the quiet node, which stops on its own when no verdict comes.
  if (!job) return;
  const QuietVerdict verdict = judge_job_quiet(*job);
  if (verdict.kind == Quiet::hang) return;
  if (options_.notice)
    options_.notice(
        verdict.kind == Quiet::working
            ? "the job, across the nodes: rank" + std::string(verdict.working.size() > 1 ? "s " : " ") +
                  rank_words(verdict.working) + " outside any collective " +
                  (verdict.working.size() > 1 ? "work" : "works") +
                  " after this node's ranks finished: quiet, not hung; the run goes on"
            : "the job, across the nodes: ranks finished and no rank waits in a collective: quiet, "
              "not hung; the run goes on");
  job_not_hung();
}

void ControlChannel::job_not_hung() {
  if (options_.node_rank != 0 || hang_round_.number() == 0) return;
  ControlMessage busy;
  busy.kind = ControlMessage::Kind::busy;
  busy.round = hang_round_.number();
  send_to_all(peers_, busy);
}

void ControlChannel::settle(RunOutcome& outcome) {
  if (settled_) return;
  settled_ = true;
  running_ = false;     // the ranks here are done: no agent is admitted until the next attempt
  hang_round_.cancel(); // a hang diagnosis still gathering belongs to the attempt that ended
  reset_preemption();   // so does a preemption (the next attempt starts afresh)
  const bool local_ok = outcome.status == RunOutcome::Status::succeeded;
  if (outcome.preemption && options_.node_rank != 0) end_stop(outcome); // before `fail`: node 0 may wait
  if (!local_ok && !outcome.remote_failure)
    report_failure(outcome.exit_code(), outcome.root_cause_rank, outcome.reason);
  if (outcome.preemption && options_.node_rank == 0) end_stop(outcome); // after `abort`: it ends the laggards
  if (local_ok && remote_ && !outcome.remote_failure)
    adopt(outcome, *remote_); // taken by check() after the end
  if (local_ok && !remote_) wait_all_done(outcome);
}

void ControlChannel::end_stop(RunOutcome& outcome) {
  PreemptionReport& p = *outcome.preemption;
  if (options_.node_rank != 0) {
    ControlMessage m;
    m.kind = ControlMessage::Kind::stopped;
    m.node_rank = options_.node_rank;
    m.count = static_cast<int>(p.polling_ranks.size());
    m.stopped = static_cast<int>(p.stopped_ranks.size());
    send_to_all(peers_, m);
    return;
  }
  // The other nodes' ranks have at most the grace period they were given
  // (less what passed since), then their agents kill them and say so; the
  // margin covers that kill and a loaded machine.
  const auto deadline =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(p.deadline_s)) +
      k_stop_end_margin;
  for (;;) {
    for (const auto& peer : peers_)
      if (peer->link.closed()) stop_ends_.gone(peer->node_rank);
    const auto now = Clock::now();
    if (stop_ends_.complete(options_.num_nodes) || now >= deadline) break;
    std::vector<pollfd> fds;
    for (const int fd : poll_fds()) fds.push_back({fd, POLLIN, 0});
    poll_retry(fds.data(), fds.size(),
               poll_timeout(now, std::min(deadline, next_deadline().value_or(deadline))));
    (void)pump(Clock::now()); // this node's end is out already: only the words matter now
  }
  p.unsaved_nodes = stop_ends_.unsaved(options_.num_nodes);
}

void ControlChannel::wait_all_done(RunOutcome& outcome) {
  const bool server = options_.node_rank == 0;
  if (!server) {
    ControlMessage done;
    done.kind = ControlMessage::Kind::done;
    done.node_rank = options_.node_rank;
    send_to_all(peers_, done);
  }
  // Wait for the others (node 0) or for node 0's finish (the rest), with
  // heartbeats still going so a dead peer is noticed.
  for (;;) {
    const bool all_done =
        server ? std::all_of(peers_.begin(), peers_.end(), [](const auto& p) { return p->done; }) : finished_;
    if (all_done) break;
    std::vector<pollfd> fds;
    for (const int fd : poll_fds()) fds.push_back({fd, POLLIN, 0});
    const auto now = Clock::now();
    poll_retry(fds.data(), fds.size(), poll_timeout(now, next_deadline().value_or(now + milliseconds(1000))));
    if (auto f = pump(Clock::now())) {
      adopt(outcome, *f);
      break;
    }
    if (server) judge_quiet_while_done(Clock::now());
  }
  if (server && !remote_) {
    ControlMessage fin;
    fin.kind = ControlMessage::Kind::finish;
    send_to_all(peers_, fin);
  }
}

void ControlChannel::finish(RunOutcome& outcome) {
  settle(outcome);
  close_gracefully();
}

void ControlChannel::close_gracefully() {
  refuse_waiting(125, "the job ended before a restart could admit this node");
  late_.clear();
  listener_.reset();
  const auto deadline = Clock::now() + k_linger;
  for (auto& peer : peers_)
    if (!peer->link.closed()) peer->link.shut_down_writes();
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<Peer*> open;
    for (auto& peer : peers_) {
      if (peer->link.closed()) continue;
      fds.push_back({peer->link.fd(), POLLIN, 0});
      open.push_back(peer.get());
    }
    const auto now = Clock::now();
    if (fds.empty() || now >= deadline) break;
    poll_retry(fds.data(), fds.size(), poll_timeout(now, deadline));
    for (Peer* peer : open) peer->link.read_lines(); // read and discard until the peer's EOF
  }
  peers_.clear();
}

// Preemption across nodes (docs/preemption.md, "Several nodes").

void ControlChannel::preempt_signalled(int sig, const NodeSteps& mine, std::chrono::milliseconds grace) {
  const auto now = Clock::now();
  if (options_.node_rank == 0) {
    stop_round_.take(0, mine, Clock::duration::zero(), now);
    start_preemption(sig, 0, grace, now);
    return;
  }
  ControlMessage m;
  m.kind = ControlMessage::Kind::preempt;
  m.node_rank = options_.node_rank;
  m.signal = sig;
  m.grace_ms = static_cast<int>(std::min<long long>(grace.count(), 999'999'999));
  m.count = mine.polling;
  m.steps = mine.steps;
  m.rate_milli = rate_milli(mine.rate);
  send_to_all(peers_, m);
}

void ControlChannel::start_preemption(int sig, int node, std::chrono::milliseconds grace,
                                      Clock::time_point now) {
  if (!stop_round_.start(sig, node, grace, now, options_.counts_wait)) return;
  // One round trip: every node whose counts node 0 does not have yet is
  // asked; node 0's own ranks through its supervisor (counts_asked).
  if (!stop_round_.has(0)) counts_asked_ = true;
  ControlMessage count;
  count.kind = ControlMessage::Kind::count;
  for (auto& peer : peers_)
    if (!stop_round_.has(peer->node_rank)) send_message(*peer, count);
}

bool ControlChannel::counts_asked() { return std::exchange(counts_asked_, false); }

void ControlChannel::ranks_counted(const NodeSteps& mine) {
  if (options_.node_rank == 0) {
    if (stop_round_.gathering()) stop_round_.take(0, mine, Clock::duration::zero(), Clock::now());
    return;
  }
  ControlMessage m;
  m.kind = ControlMessage::Kind::counted;
  m.node_rank = options_.node_rank;
  m.count = mine.polling;
  m.steps = mine.steps;
  m.rate_milli = rate_milli(mine.rate);
  send_to_all(peers_, m);
}

std::optional<JobStop> ControlChannel::job_stop(Clock::time_point now) {
  if (options_.node_rank != 0) return std::exchange(job_stop_, std::nullopt);
  auto stop = stop_round_.decide(awaited_nodes(), options_.num_nodes, now);
  if (!stop) return std::nullopt;
  ControlMessage m;
  m.kind = ControlMessage::Kind::stopat;
  m.steps = stop->stop_step;
  m.signal = stop->signal;
  m.grace_ms = static_cast<int>(std::min<long long>(stop->grace.count(), 999'999'999));
  m.node_rank = stop->node;
  send_to_all(peers_, m);
  return stop;
}

void ControlChannel::reset_preemption() {
  stop_round_.reset();
  stop_heard_ = false;
  counts_asked_ = false;
  job_stop_.reset();
}

} // namespace air
