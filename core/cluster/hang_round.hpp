#pragma once

#include "core/hang/diagnosis.hpp"
#include "core/hang/job_hang.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace air {

/// Node 0's side of one job-wide hang diagnosis (docs/hangs.md, "Several
/// nodes"): a round starts when a node goes quiet, takes each node's ranks'
/// places (`place` lines, node 0's own at once) and ends when every node it
/// waits for sent all the places it announced, or at the deadline; the
/// places then go to node 0's supervisor, which names the laggards. Pure: no
/// sockets, the clock is passed in.
class HangRound {
public:
  using Clock = std::chrono::steady_clock;

  /// Starts the next round, gathering until now + wait; returns its number
  /// (from 1), which `where` carries.
  int start(Clock::time_point now, std::chrono::milliseconds wait);
  /// Whether a round is gathering.
  bool gathering() const { return deadline_.has_value(); }
  /// The latest round's number (0: none yet).
  int number() const { return number_; }
  /// When the gathering round ends at the latest; nullopt when none gathers.
  std::optional<Clock::time_point> deadline() const { return deadline_; }

  /// One place of node `node`, which sends `count` in all: taken while round
  /// `round` is the one gathering, up to that count.
  void take_place(int round, int node, int count, const HangRank& place);
  /// How rank `rank` of node `node` worked (its `work` line, which comes
  /// before its `place`): taken while round `round` is the one gathering.
  void take_work(int round, int node, int rank, bool working, bool exited_ok);
  /// A node's places all at once (node 0's own), while a round gathers.
  void take_places(int node, const std::vector<HangRank>& places);

  /// The job's places once every node in `awaited` sent all it announced, or
  /// once `now` reached the deadline; the round then ends. nullopt meanwhile,
  /// and when no round gathers. Nodes 0..num_nodes-1 that sent nothing are
  /// named as missing, unless `done` lists them (their ranks all exited 0).
  std::optional<JobPlaces> complete(const std::vector<int>& awaited, int num_nodes, Clock::time_point now,
                                    const std::vector<int>& done = {});
  /// Drops the round still gathering (its attempt ended); the numbering goes on.
  void cancel();

private:
  bool node_complete(int node) const;

  int number_ = 0;
  std::optional<Clock::time_point> deadline_;
  std::map<int, std::vector<HangRank>> places_; ///< this round's places by node
  std::map<int, int> counts_;                   ///< how many places each node announced
  /// This round's `work` lines by (node, global rank): working, exited 0.
  std::map<std::pair<int, int>, std::pair<bool, bool>> work_;
};

} // namespace air
