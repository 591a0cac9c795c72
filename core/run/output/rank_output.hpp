#pragma once

#include "core/hang/hang_clock.hpp"
#include "core/run/console.hpp"
#include "core/run/output/pipe_readers.hpp"
#include "core/run/rank_table.hpp"
#include "core/run/teardown.hpp"

#include <poll.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace air {

/// Rank output: reads the ranks' pipes and fans each read out to the rank's
/// log files (the bytes as they came), the filtered logs, the tail kept for
/// the reports and the console (lines, prefixed), with the unfinished lines
/// (prompts, progress bars) shown as they come. A whole line is progress
/// for the hang watch. The pipes of ranks that print in bulk are read by
/// threads of their own (core/run/output/pipe_readers.hpp), under lock().
class RankOutput {
public:
  using Clock = std::chrono::steady_clock;

  RankOutput(const LaunchPlan& plan, RankTable& ranks, Console& console, RunOutcome& out,
             const Teardown& teardown, HangClock& hang);

  /// The lock the supervisor's loop holds whenever it is not in poll: the
  /// pipe readers hand on what they read under it.
  std::mutex& lock() { return lock_; }
  /// Readable when a pipe reader closed a pipe; -1 while none runs.
  int readers_ended_fd() const { return readers_.ended_fd(); }
  /// Empties readers_ended_fd() after poll found it readable.
  void clear_readers_ended() const { readers_.clear_ended(); }

  /// Opens every log file of the plan; false (with the outcome a launch
  /// failure) when one cannot be opened.
  bool open_logs();
  /// Adds every open pipe the console can take more of to `fds` (POLLIN),
  /// but those a pipe reader reads,
  /// with its owner at the same place in `owners`.
  void add_poll_fds(std::vector<pollfd>& fds, std::vector<std::pair<RankState*, RankStream*>>& owners) const;
  /// Whether `s` is left in its pipe for now: the console takes no more
  /// (a live rank waits, as with any pipe). Not once the run is ending: then
  /// the output is taken, and dropped with a count if need be.
  bool held_back(const RankState& r, const RankStream& s) const;
  /// Past when the end of the run stops waiting for an ended rank's pipes:
  /// whatever holds them then is a leftover (the sweep ends it).
  Clock::time_point drain_deadline(const RankState& r) const;
  /// Reads what `s` has; false when nothing came (and at its end, which
  /// closes it). A read that brings bulk may move the pipe to a pipe reader.
  bool read(RankState& r, RankStream& s);
  /// Reads what an ended rank left in its pipes (bounded): its last lines
  /// tell a lost peer apart. Its RankOutcome::tail is up to date afterwards.
  /// The pipe readers hand every pipe back first (the lock is let go while
  /// they finish what they read).
  void drain_ready(RankState& r);
  /// The end of the run, once the leftovers are gone: takes what is still
  /// in the pipes and closes them. Their writers have ended, so a read finds
  /// the end at once; one that still does not (a writer beyond air-run's
  /// reach) is left after what it wrote so far. The pipe readers end first.
  void close_all();

private:
  bool may_hand_over(const RankState& r) const;
  std::size_t read_more(int fd, std::size_t have);
  void close(RankState& r, RankStream& s);
  /// A read, or the end (`eof`) of `s`: write_logs(), then take().
  void deliver(RankState& r, RankStream& s, std::string_view data, bool eof);
  /// All of a read but the logs: the tail, the filtered logs, the console, the hang clock.
  void take(RankState& r, RankStream& s, std::string_view data, bool eof);
  void write_logs(RankState& r, RankStream& s, std::string_view data, bool eof);
  std::size_t take_lines(RankState& r, RankStream& s, std::string_view data, bool eof, bool echo);
  std::size_t take_block(RankState& r, RankStream& s, std::string_view block, bool echo,
                         const char* tail_from, std::size_t tail_max, std::size_t counted);
  static void add_to_tail(RankOutcome& o, std::string_view own, std::size_t tail_max);
  void keep_for_tail(RankState& r, std::string_view raw_lines, std::size_t lines);
  void settle_tail(RankState& r);

  /// A rank's last whole lines, raw, not yet in its RankOutcome::tail.
  struct PendingTail {
    std::string raw;
    std::size_t lines = 0;
  };
  void update_partial(RankState& r, RankStream& s);
  void show_partial(RankState& r, RankStream& s);

  std::mutex lock_;
  const LaunchPlan& plan_;
  RankTable& ranks_;
  Console& console_;
  RunOutcome& out_;
  const Teardown& teardown_;
  HangClock& hang_;
  /// Where a read lands: not zeroed, so that a run whose ranks print little
  /// never touches most of its pages (a launch of 8 ranks is milliseconds).
  std::unique_ptr<char[]> read_buf_;
  std::string console_batch_;
  /// Whole lines written to the console after console_batch_: as they are
  /// in read_buf_ (a rank without a prefix, no copy of their own), or prefixed.
  std::string_view console_block_;
  /// Where take_block puts prefixed lines (console_block_ then points here).
  std::unique_ptr<char[]> prefixed_;
  std::size_t prefixed_size_ = 0;
  std::string filtered_batch_;
  std::string tail_line_;                 ///< one line on its way to keep_for_tail
  std::vector<PendingTail> tail_pending_; ///< per rank, by RankState::index
  std::optional<LineSink>
      filtered_[2];     ///< filtered_stdout.log, filtered_stderr.log (LaunchPlan::filtered_files)
  PipeReaders readers_; ///< last: its threads use what is above
};

} // namespace air
