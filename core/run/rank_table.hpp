#pragma once

#include "core/base/line_splitter.hpp"
#include "core/base/log_chunker.hpp"
#include "core/os/log_sink.hpp"
#include "core/run/outcome.hpp"
#include "core/run/plan.hpp"
#include "core/run/supervisor.hpp"

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace air {

/// One of a rank's output pipes (stdout or stderr) as the supervisor reads it.
struct RankStream {
  UniqueFd fd;
  LineSplitter splitter;  ///< the console's and the tail's view: lines
  LogChunker log_chunker; ///< the logs' view: the bytes as they came
  bool is_stderr = false;
  bool tty = false; ///< fd is a pseudo-terminal's master (ConsoleOptions::stdout_tty)
  /// Bytes of the unfinished line already shown (a prompt of the --stdin rank).
  std::size_t shown_partial = 0;
  /// The pipe reader thread that reads fd (core/run/output/pipe_readers.hpp);
  /// -1: the supervisor's loop does.
  int reader = -1;

  /// 0 for stdout, 1 for stderr: the index into per-stream arrays.
  int index() const { return is_stderr ? 1 : 0; }
};

/// What the supervisor knows of one rank of this node while it runs: its
/// process, its pipes and its log files. Its result goes into the run's
/// RankOutcome of the same index.
struct RankState {
  const RankPlan* plan = nullptr;
  std::size_t index = 0;
  pid_t pid = -1;
  bool spawned = false;
  bool reaped = false;
  RankStream streams[2];
  std::chrono::steady_clock::time_point started{};
  std::chrono::steady_clock::time_point reaped_at{};
  std::string prefix;     ///< "[rank3]: " on stdout
  std::string prefix_err; ///< the same on stderr (coloured or not, per stream)
  std::optional<LineSink> log;
  std::optional<LineSink> stream_logs[2]; ///< torchrun's -r/-t files: stdout.log, stderr.log
  std::string filter_prefix;              ///< "[rankN]: ", before its lines in filtered_*.log
  bool reads_stdin = false;               ///< air-run forwards its stdin to it (ConsoleOptions::stdin_rank)
  int log_open_line = -1;                 ///< the stream whose bytes last left `log` mid-line; -1: none
  /// The first teardown signal air-run sent it while it was running, 0 if
  /// none: its exit status then tells whether that signal ended it.
  int teardown_signal = 0;
  /// Preemption asked it, through its page, to stop at a step (it calls
  /// air.should_stop()): no signal went out, so it stopped when it exits 0
  /// (or dies of air-run's SIGKILL at the deadline), not when it dies of a
  /// SIGTERM someone else sent.
  bool asked_to_stop = false;

  /// Started and not reaped yet.
  bool running() const { return spawned && !reaped; }
  /// Either pipe still open.
  bool open() const { return streams[0].fd || streams[1].fd; }
  /// The prefix of its lines on stream `stream` (0 stdout, 1 stderr).
  const std::string& prefix_of(int stream) const { return stream == 1 ? prefix_err : prefix; }
};

/// The rank table: every rank of this node's plan, in plan order, and the
/// live ones by pid for reaping. Entries never move once made, so the other
/// parts of the supervisor keep references to them.
class RankTable {
public:
  /// One entry per rank of `plan`, with its console prefixes; fills each
  /// rank's ids into `out.ranks` (sized here).
  RankTable(const LaunchPlan& plan, const ConsoleOptions& console, RunOutcome& out);
  RankTable(const RankTable&) = delete;
  RankTable& operator=(const RankTable&) = delete;

  std::vector<RankState>::iterator begin() { return ranks_.begin(); }
  std::vector<RankState>::iterator end() { return ranks_.end(); }
  std::vector<RankState>::const_iterator begin() const { return ranks_.begin(); }
  std::vector<RankState>::const_iterator end() const { return ranks_.end(); }
  std::size_t size() const { return ranks_.size(); }
  RankState& operator[](std::size_t index) { return ranks_[index]; }
  const RankState& operator[](std::size_t index) const { return ranks_[index]; }

  /// Records that `r` runs as `pid`: it is reaped by that pid from now on.
  void started(RankState& r, pid_t pid);
  /// Forgets `r`'s pid (reaped, or its start was undone).
  void forget(RankState& r) { by_pid_.erase(r.pid); }
  /// The live rank with `pid`, or null for a child that is no rank.
  RankState* by_pid(pid_t pid);
  /// How many ranks run now.
  std::size_t running() const;
  /// Whether every rank that was started has been reaped.
  bool all_ended() const;
  /// Whether a rank takes air-run's stdin (ConsoleOptions::stdin_rank).
  bool any_reads_stdin() const;
  /// The global rank by index, for the diagnoses.
  const std::vector<int>& global_ranks() const { return ids_; }

private:
  std::vector<RankState> ranks_;
  std::unordered_map<pid_t, RankState*> by_pid_;
  std::vector<int> ids_;
};

} // namespace air
