#pragma once

#include "core/base/error.hpp"
#include "core/hang/diagnosis.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace air {

/// One line of the multi-node control protocol between node 0's agent and the
/// others (core/cluster/control.hpp). Text, one message per line, fields
/// separated by single spaces; the free text comes last and may contain spaces:
///
///   hello 2 NODE_RANK NUM_NODES RANKS_PER_NODE NAME   agent -> node 0, after connecting (2 = protocol
///                                                     version; NODE_RANK -1: c10d, assign me one)
///   start NODE_RANK NUM_NODES MASTER_PORT RUN_ID [MLFLOW_EXPERIMENT_ID MLFLOW_RUN_ID]
///                                                     node 0 -> each: everyone joined, launch (with
///                                                     that node's rank, the node count, its MLflow run)
///   refuse CODE TEXT                                  node 0 -> all: the job cannot start (exit CODE)
///   hb                                                both ways, every second
///   fail NODE RANK CODE NAME TEXT                     agent -> node 0: this node failed
///   abort NODE RANK CODE NAME TEXT                    node 0 -> all: node NODE failed, tear down
///   done NODE                                         agent -> node 0: every rank here exited 0
///   finish                                            node 0 -> all: every node is done, exit 0
///   over NODE RESTARTABLE                             agent -> node 0: this node's group is down after
///                                                     a failure; 1 = it may restart (0: interrupted...)
///   restart ATTEMPT MASTER_PORT [NODE_RANK NUM_NODES] node 0 -> all: start attempt ATTEMPT (0-based);
///                                                     with a node lost (c10d MIN:MAX), this node's new
///                                                     rank and the new node count
///   nodes NAME...                                     node 0 -> all, after start and restart: the
///                                                     attempt's nodes in node-rank order
///   stop                                              node 0 -> all: no restart, the run ends
///   wait                                              node 0 -> a late agent (c10d MIN:MAX, the job
///                                                     running): admitted; `start` and `restart` follow
///                                                     when the group restarts with it
///   regroup TEXT                                      node 0 -> all: a node is waiting to join; end the
///                                                     attempt, the group restarts with it (not a failure)
///   quiet NODE                                        agent -> node 0: this node's ranks made no
///                                                     progress for --hang-timeout; diagnose the job
///   where ROUND                                       node 0 -> all: send your ranks' places for the
///                                                     job's hang diagnosis number ROUND (from 1)
///   place ROUND NODE COUNT RANK FLAGS STEPS SEQ WAITING_MS SINCE NCCL_SEQ NCCL_OP NCCL_STATE
///         COLLECTIVE PLACE                            agent -> node 0: one of its COUNT ranks' places
///                                                     (one line per rank; FLAGS: running, counted, in
///                                                     a collective as 0/1, e.g. "111"; "-" stands for
///                                                     an empty word; PLACE is the rest of the line)
///   work ROUND NODE RANK FLAGS                        agent -> node 0, before each `place`: how that
///                                                     rank worked, by its node's readings (FLAGS:
///                                                     working, exited 0, as 0/1, e.g. "10"). Node 0
///                                                     judges the job's quiet from them; an older node
///                                                     0 ignores the line, as it ignores any unknown one
///   busy ROUND                                        node 0 -> all: diagnosis ROUND found no hang (a
///                                                     rank works, or ranks finished and none waits):
///                                                     a new quiet spell begins on every node
///   hung NODE RANK CODE NAME TEXT                     node 0 -> all: as abort, because the job hung
///                                                     (--on-hang stop): every node ends as hung; an
///                                                     abort follows for agents that do not know hung
///   preempt NODE SIGNAL GRACE_MS POLLING STEPS RATE_MILLI
///                                                     agent -> node 0: a preemption signal reached
///                                                     this node; its POLLING ranks that call
///                                                     should_stop() are at most at STEPS, the fastest
///                                                     making RATE_MILLI/1000 steps a second; they
///                                                     must be done within GRACE_MS
///   count                                             node 0 -> all: send your ranks' step counts
///                                                     (a preemption is being decided)
///   counted NODE POLLING STEPS RATE_MILLI             agent -> node 0: the answer, as in preempt
///   stopat STEP SIGNAL GRACE_MS NODE                  node 0 -> all: the job's preemption: ranks that
///                                                     call should_stop() stop at step STEP (0: at
///                                                     their next call) within GRACE_MS from now, the
///                                                     others get SIGNAL at once; NODE had the signal.
///                                                     An agent that does not know stopat stops on
///                                                     the abort that follows, as before
///   stopped NODE ASKED STOPPED                        agent -> node 0, after a stop across nodes: every
///                                                     rank of this node has exited; STOPPED of the
///                                                     ASKED ranks stopped at the job's step (node 0
///                                                     waits for it before `scontrol requeue`)
///
/// RANK is the root cause's global rank (-1: none, e.g. an interrupt); CODE is
/// the failing node's exit code, which every node then exits with.
struct ControlMessage {
  enum class Kind {
    hello,
    start,
    refuse,
    heartbeat,
    fail,
    abort,
    done,
    finish,
    over,
    restart,
    stop,
    nodes,
    wait,
    regroup,
    // Hang diagnosis across nodes (docs/hangs.md):
    quiet,
    where,
    place,
    work,
    busy,
    hung,
    // Preemption across nodes (docs/preemption.md):
    preempt,
    count,
    counted,
    stopat,
    stopped,
  };
  Kind kind = Kind::heartbeat;
  int node_rank = -1;       ///< restart: -1 = unchanged; quiet, place, work: the sending node
  int num_nodes = 0;        ///< hello
  int ranks_per_node = 0;   ///< hello
  int rank = -1;            ///< fail, abort, hung
  int exit_code = 0;        ///< fail, abort, hung, refuse
  int master_port = 0;      ///< start, restart
  int attempt = 0;          ///< restart
  bool restartable = false; ///< over
  std::string name;         ///< hello, fail, abort: the node's name
  /// start: run id; refuse, fail, abort, regroup: one line of explanation; nodes: the names
  std::string text;
  /// start: the MLflow run node 0 created (`start ... RUN_ID EXPERIMENT_ID MLFLOW_RUN_ID`); "" when none.
  std::string mlflow_experiment_id, mlflow_run_id;
  int round = 0; ///< where, place, work, busy: which job-wide hang diagnosis
  int count = 0; ///< place: how many ranks the node sends; preempt, counted: its polling ranks
  /// place: one rank's place (its `node` is node_rank's, not carried). Long
  /// text is cut so that the line stays far below the protocol's limit.
  /// work: its `rank`, `working` and `exited_ok` only.
  HangRank place;
  // preempt, counted, stopat (`count` carries the polling ranks there):
  int signal = 0;               ///< preempt, stopat: the signal
  int grace_ms = 0;             ///< preempt, stopat: how long the ranks have left
  std::uint64_t steps = 0;      ///< preempt, counted: the furthest polling rank; stopat: the stop step
  std::uint64_t rate_milli = 0; ///< preempt, counted: the fastest one's steps per 1000 s
  int stopped = 0;              ///< stopped: how many of the `count` ranks asked stopped at the step
};

/// The longest PLACE and the longest word a `place` line carries; longer ones are cut.
inline constexpr std::size_t k_max_place_text = 1024;
inline constexpr std::size_t k_max_place_word = 128;

/// The protocol version `hello` carries; node 0 refuses any other.
inline constexpr int k_control_protocol_version = 2;

/// The message as one line, '\n' included. Newlines in names and text become
/// spaces and an empty name becomes "?", so the result always parses back.
std::string format_control_message(const ControlMessage& message);

/// Parses one line (without its '\n'). Errors (usage kind) quote the line:
/// "control message 'hello x': bad number 'x'".
Expected<ControlMessage> parse_control_message(std::string_view line);

} // namespace air
