#pragma once

#include "core/hang/diagnosis.hpp"
#include "core/hang/job_hang.hpp"
#include "core/run/job_preemption.hpp"
#include "core/run/outcome.hpp"

#include <chrono>
#include <optional>
#include <vector>

namespace air {

/// What this node's supervisor tells the job (in a multi-node run, the
/// control channel, core/cluster/control.hpp): one event per fact, sent
/// with SupervisorHooks::tell as soon as the supervisor knows it.
struct NodeEvent {
  enum class Kind {
    /// This node's run failed, timed out, was interrupted or could not
    /// launch (`outcome`); sent once, never for a failure elsewhere, so the
    /// other nodes are told before this node's grace period even starts.
    failed,
    /// This node's ranks made no progress for --hang-timeout (its diagnosis begins).
    quiet,
    /// This node's ranks' places (`places`), from its latest hang diagnosis.
    placed,
    /// Node 0: the job's quiet spell is no hang (a rank works, or ranks
    /// finished and none waits): every node begins a new spell.
    no_hang,
    /// A preemption signal (`signal`) reached this node while `steps.polling`
    /// of its ranks call air.should_stop(); they have `grace` from now.
    preempted,
    /// This node's polling ranks' step counts (`steps`), as node 0 asked.
    counted,
  };
  Kind kind = Kind::quiet;
  const RunOutcome* outcome = nullptr; ///< failed: valid during the call
  std::vector<HangRank> places;        ///< placed
  int signal = 0;                      ///< preempted
  NodeSteps steps;                     ///< preempted, counted
  std::chrono::milliseconds grace{0};  ///< preempted

  static NodeEvent failed_with(const RunOutcome& outcome);
  static NodeEvent quiet_ranks();
  static NodeEvent placed_ranks(std::vector<HangRank> places);
  static NodeEvent no_hang_found();
  static NodeEvent preempted_by(int signal, const NodeSteps& steps, std::chrono::milliseconds grace);
  static NodeEvent counted_steps(const NodeSteps& steps);
};

/// What the job tells this node's supervisor: handed back by
/// SupervisorHooks::check after every wake-up and by SupervisorHooks::tell
/// for what the job decides at once, in the order the supervisor acts on them.
struct JobEvent {
  enum class Kind {
    /// Node 0 asks for this node's polling ranks' step counts: the
    /// supervisor answers with NodeEvent::counted.
    counts_asked,
    /// The job's stop step (`stop`), decided by node 0, on every node.
    stop,
    /// Another node failed (`failure`): the usual teardown follows, and the
    /// outcome carries it as remote_failure.
    failed,
    /// Node 0 asks where this node's ranks are: the supervisor answers with
    /// NodeEvent::placed, diagnosing at once if it must.
    places_asked,
    /// Node 0 only: the job's places (`places`), once every node answered
    /// or the wait for them ended; the supervisor names the job's laggards.
    places,
    /// Node 0 found the job's quiet spell no hang: this node's diagnosis of
    /// it is withdrawn and a new spell begins.
    not_hung,
  };
  Kind kind = Kind::counts_asked;
  JobStop stop;          ///< stop
  RemoteFailure failure; ///< failed
  JobPlaces places;      ///< places

  static JobEvent of(Kind kind);
  static JobEvent stop_at(JobStop stop);
  static JobEvent failed_with(RemoteFailure failure);
  static JobEvent places_of(JobPlaces places);
};

/// Events from outside this node's ranks that the supervisor's loop waits on
/// together with them, ninja-style: today the multi-node control connection
/// (core/cluster/control.hpp). The two talk through the two event types
/// above, one each way: no flags to poll. All calls happen on the
/// supervisor's thread.
class SupervisorHooks {
public:
  virtual ~SupervisorHooks() = default;
  /// Descriptors to poll for input in the next iteration.
  virtual std::vector<int> poll_fds() const = 0;
  /// When `check` must run even if no descriptor is ready (heartbeats, the
  /// end of a wait for other nodes); nullopt: never.
  virtual std::optional<std::chrono::steady_clock::time_point> next_deadline() const = 0;
  /// Runs after every wake-up, before exits are judged: reads what is ready,
  /// sends what is due, and hands back what the job says. A stop step comes
  /// before a failure read in the same pass (node 0's own preemption ends
  /// with an abort right behind its stopat).
  virtual std::vector<JobEvent> check(std::chrono::steady_clock::time_point now) = 0;
  /// This node's news for the job; returns what the job decides at once
  /// (node 0, whose own part may complete a round).
  virtual std::vector<JobEvent> tell(const NodeEvent& event, std::chrono::steady_clock::time_point now) = 0;

  /// Whether node 0's agent names the job's laggards and decides whether the
  /// run stops: then this node's own hang diagnosis only goes to its log and
  /// summary, and to node 0. The default is one node's.
  virtual bool job_wide_hangs() const { return false; }
  /// Whether node 0 picks one stop step for the whole job: then a
  /// preemption signal here goes to node 0 (NodeEvent::preempted) and this
  /// node stops at the step JobEvent::stop hands back. The default is one node's.
  virtual bool job_wide_preemption() const { return false; }
  /// Whether another node may still tell the cause of a local rank's lost
  /// peer: then the wait for it (core/run/exits.hpp) runs to its deadline even
  /// when every local rank has ended, since the cause (a node's `fail`, its
  /// agent's closed connection) comes on the control connections, not from a
  /// local rank. The default is one node's: no.
  virtual bool others_may_tell() const { return false; }
};

} // namespace air
