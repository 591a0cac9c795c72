#pragma once

#include "core/base/error.hpp"
#include "core/base/unique_fd.hpp"
#include "core/cluster/control_options.hpp"
#include "core/cluster/control_peer.hpp"
#include "core/cluster/hang_round.hpp"
#include "core/cluster/join_gate.hpp"
#include "core/cluster/stop_round.hpp"
#include "core/run/job_events.hpp"
#include "core/run/outcome.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace air {

/// The small TCP connection every agent keeps to node 0's agent during a
/// multi-node run (static mode and Slurm): node 0 listens on the control
/// port; the others connect, say `hello`, and wait for `start`, which node 0
/// sends once every node joined with the same node count and ranks per node.
/// During the run a failure anywhere (`fail`) becomes `abort` to every node;
/// heartbeats every second catch an agent that died without a word
/// (silence for 5 s) and a closed socket catches one that exited. At the end
/// the nodes agree (`done` / `finish`) so that every node exits with the same
/// code: 0, or the failing node's. Protocol lines: core/cluster/control_message.hpp.
///
/// Use: `join` before planning (it blocks), pass the channel to `supervise`
/// as its hooks, then `finish` with the outcome. Not thread-safe; no signals.
class ControlChannel : public SupervisorHooks {
public:
  /// Joins the job: node 0 binds `port` on every interface and waits up to
  /// join_timeout for the other nodes; the others connect to
  /// master_host:port with retries until join_timeout, then wait for start.
  /// Errors: usage (exit 2) when nodes disagree on the node count or ranks
  /// per node, naming the node ("node 1 (node2) runs 3 ranks, node 0 (node1)
  /// runs 2: ..."); system (exit 125) for a node that never joined ("node 1
  /// (node2) did not join within 5s"), an unreachable node 0, or a socket
  /// call that failed.
  /// A signal on options.interrupt_fd ends the wait: the error says so and
  /// `*interrupted_by` (when given) is the signal; node 0 then refuses the
  /// others with exit 128+N, another node tells node 0. A node stopped by
  /// another node's interrupt gets that signal in `*interrupted_by` too, so
  /// every node exits 128+N.
  static Expected<std::unique_ptr<ControlChannel>> join(const ControlOptions& options,
                                                        int* interrupted_by = nullptr);

  ~ControlChannel() override;
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  /// The run id node 0 chose; every node uses it.
  const std::string& run_id() const { return run_id_; }
  /// This node's rank (c10d: handed out by node 0), the job's node count and
  /// node 0's master port, as agreed at the start.
  int node_rank() const { return options_.node_rank; }
  int num_nodes() const { return options_.num_nodes; }
  int master_port() const { return master_port_; }
  /// The nodes of the current attempt, by node rank (node 0 first): their
  /// names as each agent gave it (node 0 tells the others with `nodes`).
  const std::vector<std::string>& node_names() const { return members_; }
  /// c10d with --nnodes MIN:MAX: a node lost between attempts is dropped
  /// (the others are renumbered) instead of ending the run, while at least
  /// MIN nodes are left.
  bool elastic() const { return options_.c10d && options_.min_nodes > 0 && options_.min_nodes < max_nodes_; }
  /// The attempt this node starts in: 0, or, for an agent that joined a
  /// running job (c10d MIN:MAX), the attempt node 0 restarted the group in
  /// to admit it.
  int first_attempt() const { return first_attempt_; }
  /// The signal that ended `join` or `agree_restart` (0: none); the CLI exits 128+N.
  int interrupted_by() const { return interrupted_by_; }

  /// After an attempt: reports a local failure not yet reported, or, when
  /// every local rank succeeded, waits until every node is done or one
  /// fails, writing a failure elsewhere into `outcome`. Keeps the
  /// connection open (a restart may follow); `finish` closes it.
  void settle(RunOutcome& outcome);

  /// After `settle` left `outcome` failed, with restarts left: tells node 0
  /// whether this node may restart (`over`), and node 0 answers every node
  /// with `restart ATTEMPT PORT` when every node may, else `stop`. Node 0's
  /// `master_port` is the next attempt's MASTER_PORT. Returns the port, or
  /// nullopt when the run ends (a node said no, a node is gone, or a signal
  /// came: then `outcome` says interrupted). When `elastic`, a node that is
  /// gone is dropped instead: node 0 renumbers the others contiguously (in
  /// their old order) and hands each its new rank and the node count with
  /// `restart`; `node_rank()` and `num_nodes()` then say the new values.
  /// Fewer than MIN nodes left ends the run.
  std::optional<int> agree_restart(RunOutcome& outcome, bool restartable, int attempt, int master_port);

  /// The MLflow run node 0 created ("" when none): every node's ranks log into it.
  const std::string& mlflow_experiment_id() const { return mlflow_experiment_id_; }
  const std::string& mlflow_run_id() const { return mlflow_run_id_; }

  /// Tells the other nodes that this node failed before or without
  /// supervising (a target that cannot start): they stop with `exit_code`.
  void report_failure(int exit_code, int rank, const std::string& reason);

  /// After `supervise`: reports a local failure not yet reported, or, when
  /// every local rank succeeded, waits until every node is done (node 0
  /// answers `finish`) or one fails. After a stop across nodes (a
  /// preemption), node 0 returns only once every other node's ranks have
  /// exited too (`stopped`, or the node's end), so that what follows (a
  /// Slurm requeue) cannot cut a slower node's save short. A failure elsewhere is written into
  /// `outcome` (status failed, remote_failure, reason), so every node exits
  /// with the failing node's code. Closes the connection gracefully.
  void finish(RunOutcome& outcome);

  // SupervisorHooks: the job's side of the two event types (core/run/job_events.hpp).
  std::vector<int> poll_fds() const override;
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const override;
  std::vector<JobEvent> check(std::chrono::steady_clock::time_point now) override;
  std::vector<JobEvent> tell(const NodeEvent& event, std::chrono::steady_clock::time_point now) override;
  /// Hangs across nodes: a quiet node says `quiet`; node 0 then asks every
  /// node (itself included) for its ranks' places with `where`, gathers the
  /// `place` lines for up to places_wait and hands them to its supervisor,
  /// which names the job's laggards, or finds a rank working (each node's
  /// `work` lines): then `busy` tells every node that it is no hang. A stop
  /// for a hang goes out as `hung`.
  bool job_wide_hangs() const override { return options_.num_nodes > 1; }
  /// Preemption across nodes: a node that got the signal says `preempt` with
  /// its step counts; node 0 asks the others with `count` (one round trip),
  /// waits up to counts_wait for their `counted`, picks the job's step
  /// (pick_stop_step) and sends `stopat` to every node.
  bool job_wide_preemption() const override { return options_.num_nodes > 1; }
  /// Any other node still connected may tell why a local rank lost its peer:
  /// its `fail`, or its agent's closed connection (a lost node).
  bool others_may_tell() const override;

private:
  using Peer = ControlPeer;
  explicit ControlChannel(ControlOptions options);
  /// Node 0: the join server's connections; the others: the join client's.
  Status serve_join(UniqueFd listener);
  Status client_join();
  std::optional<RemoteFailure> pump(std::chrono::steady_clock::time_point now);
  /// Node 0: a line from the agent on `peer`; the others: a line from node 0.
  std::optional<RemoteFailure> on_agent_line(Peer& peer, const ControlMessage& m);
  std::optional<RemoteFailure> on_node0_line(const ControlMessage& m);
  /// The failure a `fail`, `abort` or `hung` line carries.
  RemoteFailure failure_of(const ControlMessage& m) const;
  /// Node 0: whether a message that names a node names the one the
  /// connection joined as; one that speaks for another node is a protocol
  /// violation, told once per connection (through options.notice) and never
  /// acted on.
  bool speaks_for_itself(Peer& peer, const ControlMessage& m);
  /// A peer gone before the end (closed, or silent past heartbeat_timeout).
  std::optional<RemoteFailure> lost(Peer& peer, bool was_closed, std::chrono::steady_clock::time_point now);
  void broadcast_abort(const RemoteFailure& failure, const Peer* except);
  /// Waits until every node is done (node 0) or node 0 says finish (the
  /// others), or a failure comes: then written into `outcome`.
  void wait_all_done(RunOutcome& outcome);
  void close_gracefully();

  // Restart agreement (core/cluster/restart_agreement.cpp).
  /// What the agreement heard: node 0, every other node's word (node rank ->
  /// may restart); the others, node 0's answer.
  struct RestartWords {
    std::map<int, bool> said;
    bool decided = false;    ///< the others: `restart` or `stop` came
    std::optional<int> port; ///< the others: `restart`'s master port
    bool lost = false;       ///< a node is gone, or a signal came
  };
  /// Heartbeats and listens until node 0 has every word (or the others its
  /// answer), a node is lost, or a signal comes (`outcome` then says
  /// interrupted and `restartable` turns false).
  void gather_restart_words(RunOutcome& outcome, bool& restartable, int attempt, RestartWords& words);
  /// One connection's lines: `over` (node 0), `restart` or `stop` (the others).
  void hear_restart_words(Peer& peer, RestartWords& words);
  /// Node 0, elastic: drops the nodes that are gone; false when fewer than
  /// MIN are left. `regroup` says whether any went.
  bool drop_lost_nodes(RunOutcome& outcome, bool& regroup);
  /// Node 0: the answer to every node, `restart` (with the agents waiting to
  /// join, renumbered when the group changed) or `stop`.
  void send_restart_answer(bool all, bool regroup, int attempt, int master_port);
  /// A fresh attempt on `master_port`: nothing failed yet, nobody is done.
  void begin_attempt(int master_port);

  ControlOptions options_;
  std::string run_id_;
  std::string mlflow_experiment_id_;
  std::string mlflow_run_id_;
  std::vector<std::unique_ptr<Peer>> peers_; ///< node 0: one per other node; others: node 0
  std::chrono::steady_clock::time_point next_heartbeat_{};
  /// The previous pass over the connections: a pass far later than that
  /// means this agent itself was frozen (SIGSTOP, a paused machine).
  std::chrono::steady_clock::time_point last_pump_{};
  /// This node's own last silence long enough for the others to count it
  /// lost (zero: none), and when it ended.
  std::chrono::steady_clock::duration frozen_for_{};
  std::chrono::steady_clock::time_point woke_at_{};
  bool failure_reported_ = false;       ///< this node's failure (or node 0's abort) is out
  std::optional<RemoteFailure> remote_; ///< the failure elsewhere that stopped this node
  bool finished_ = false;               ///< client: node 0 said finish
  bool settled_ = false;                ///< settle() ran for this attempt
  std::map<int, bool> early_over_; ///< node 0: `over` that came before agree_restart (node -> may restart)
  int master_port_ = 0;
  int interrupted_by_ = 0;
  int max_nodes_ = 0;                ///< --nnodes MAX (num_nodes is what joined)
  std::vector<std::string> members_; ///< node_names()
  void send_members();               ///< node 0: `nodes` to every other node
  /// What the job decided since the last call, in the order check() promises:
  /// node 0's question for counts, the stop step, then the hang round's.
  void due_preemption(std::chrono::steady_clock::time_point now, std::vector<JobEvent>& events);
  void due_hang(std::chrono::steady_clock::time_point now, std::vector<JobEvent>& events);
  // What the supervisor tells (tell), one method a NodeEvent kind.
  void local_failure(const RunOutcome& outcome);
  void ranks_quiet();
  void ranks_placed(const std::vector<HangRank>& ranks);
  /// Node 0: the job's quiet was no hang; every node begins a new spell (`busy`).
  void job_not_hung();
  void preempt_signalled(int sig, const NodeSteps& mine, std::chrono::milliseconds grace);
  void ranks_counted(const NodeSteps& mine);
  // What the job decided, handed over once (due_preemption, due_hang).
  bool places_asked();
  /// `self_done`: node 0's own ranks all exited 0 (it waits for the others).
  std::optional<JobPlaces> job_places(std::chrono::steady_clock::time_point now, bool self_done = false);
  /// Node 0 once its own ranks all exited 0, waiting for the others: no
  /// supervisor of its own judges a round that another node's quiet began,
  /// so the channel does, with node 0 as done; the quiet node hears `busy`
  /// when the job's quiet is no hang (its ranks go on alone after node 0's
  /// finished, or one works).
  void judge_quiet_while_done(std::chrono::steady_clock::time_point now);
  bool counts_asked();
  std::optional<JobStop> job_stop(std::chrono::steady_clock::time_point now);

  // A node that joins later (c10d MIN:MAX; core/cluster/control.cpp, at the end).
  /// Node 0 while its ranks run: whether it takes agents that connect now.
  bool admitting() const;
  /// Node 0: takes new connections, hears the late ones, and admits an agent
  /// to the next attempt (`wait`) while the nodes stay at most MAX; more are
  /// refused (exit 2). Returns the membership change that ends the attempt
  /// when one was admitted.
  std::optional<RemoteFailure> admit_late(std::chrono::steady_clock::time_point now);
  /// One late connection's lines, through the join gate. The name it joins
  /// with when admitted.
  std::optional<std::string> hear_late(Peer& peer, std::chrono::steady_clock::time_point now);
  /// Whether a late agent's hello fits the running job; refuses it when not.
  bool late_hello_fits(Peer& peer, const ControlMessage& hello);
  /// Node 0: refuses the agents still waiting to join, and closes them.
  void refuse_waiting(int exit_code, const std::string& why);
  UniqueFd listener_;                          ///< node 0, elastic: the control port, open for late agents
  std::vector<std::unique_ptr<Peer>> late_;    ///< node 0: late connections before their hello
  std::vector<std::unique_ptr<Peer>> waiting_; ///< node 0: agents admitted to the next attempt
  JoinGate late_gate_;                         ///< node 0, elastic: the door for late agents
  bool running_ = false;                       ///< this attempt's ranks run (join/restart to settle)
  int first_attempt_ = 0;
  // Hang diagnosis across nodes
  void start_round(std::chrono::steady_clock::time_point now); ///< node 0: `where` to every node
  HangRound hang_round_;          ///< node 0: the job-wide diagnosis that gathers
  int asked_round_ = 0;           ///< others: the latest round node 0 asked for
  int answered_round_ = 0;        ///< others: the round whose places went out
  bool places_asked_ = false;     ///< places_asked() has news
  bool not_hung_ = false;         ///< others: node 0's `busy` for the latest round came
  bool quiet_unanswered_ = false; ///< others: `quiet` went out after the latest places
  bool hang_stop_ = false;        ///< this node's failure is a hang: node 0 tells the others with `hung`
  // Preemption across nodes
  /// Node 0: a preemption signal reached node `node` (this one or another):
  /// asks the nodes that have not counted yet, unless a decision is under way.
  void start_preemption(int sig, int node, std::chrono::milliseconds grace,
                        std::chrono::steady_clock::time_point now);
  void reset_preemption();
  /// Node 0: the nodes a round waits for: itself and every open connection's.
  std::vector<int> awaited_nodes() const;
  StopRound stop_round_;            ///< node 0: the job-wide preemption being decided
  bool stop_heard_ = false;         ///< others: node 0's stopat came (the first one counts)
  bool counts_asked_ = false;       ///< counts_asked() has news
  std::optional<JobStop> job_stop_; ///< others: the decision, until job_stop() hands it over
  /// After a stop across nodes, once this node's ranks exited: the others
  /// say `stopped`; node 0 waits for every other node's word (or its end)
  /// up to the grace period and a margin, and records the unsaved nodes in
  /// the outcome's preemption, which the requeue reads (requeue_verdict).
  void end_stop(RunOutcome& outcome);
  StopEnds stop_ends_; ///< node 0: the other nodes' `stopped`, from any time in the attempt
};

} // namespace air
