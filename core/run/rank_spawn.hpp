#pragma once

#include "core/base/error.hpp"
#include "core/os/process.hpp"
#include "core/run/console.hpp"
#include "core/run/progress_watch.hpp"
#include "core/run/rank_table.hpp"
#include "core/run/stdin_relay.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace air {

class Containment;
class WarmStart;

/// The spawn wave: starts every rank of the table, the ones the warm
/// interpreter accepts forked from it (--preload, core/warm/warm_start.hpp),
/// the others fresh, and gives the ranks on the console their terminals
/// (ConsoleOptions::stdout_tty) and their size.
class RankSpawn {
public:
  /// What becomes of a rank that could not be started: `error` says why.
  using Failed = std::function<void(RankState& r, const Error& error)>;

  /// `timeout`: the attempt's --timeout, from now; the wait for the warm
  /// interpreter's imports ends with it.
  RankSpawn(RankTable& ranks, RunOutcome& out, Console& console, WarmStart* warm,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt)
      : ranks_(ranks), out_(out), console_(console), warm_(warm) {
    if (timeout) deadline_ = std::chrono::steady_clock::now() + *timeout;
  }

  /// Starts every rank: forks them all first, then confirms their execs, so
  /// the children exec in parallel instead of one after another (on 32
  /// cores, 64 ranks started about twice as fast). A rank whose exec fails
  /// is then found after later ranks were started; `failed` decides what
  /// follows (the teardown stops the others like any running rank). Each
  /// rank's progress page is made before it starts; the --stdin rank's pipe
  /// goes to `stdin`.
  void spawn_all(ProgressWatch& progress, Containment& containment, StdinRelay& stdin, const Failed& failed);
  /// What runs while spawn_all waits for the warm interpreter's imports
  /// (seconds): the other nodes' heartbeats, so that they do not take this
  /// agent for dead (WarmStart::ready).
  void while_waiting(std::function<void()> meanwhile) { meanwhile_ = std::move(meanwhile); }
  /// Gives the ranks' terminals air-run's new size (less the prefix), so a
  /// library that asks again draws to the new width.
  void resize_terminals();

private:
  using Started = std::vector<std::pair<RankState*, StartedProcess>>;
  using WarmResults = std::vector<std::optional<Expected<StartedProcess>>>;
  WarmResults start_warm_ranks(Containment& containment);
  Started start_ranks(WarmResults& warm, Containment& containment, StdinRelay& stdin, const Failed& failed);
  SpawnOptions spawn_options(const RankState& r) const;

  RankTable& ranks_;
  RunOutcome& out_;
  Console& console_;
  WarmStart* warm_ = nullptr;
  std::optional<std::chrono::steady_clock::time_point> deadline_; ///< the attempt's --timeout
  bool warm_notice_ = false;                                      ///< the warm start's failure has been said
  std::function<void()> meanwhile_;                               ///< see while_waiting
};

} // namespace air
