#pragma once

#include "core/base/unique_fd.hpp"
#include "core/run/rank_table.hpp"

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace air {

/// Pipe readers: threads that take over the pipes of ranks that print in
/// bulk. The supervisor's one thread reading every rank's pipe is the cost
/// with several ranks: each pipe's pages are written on the rank's CPU and
/// read on the supervisor's, and all the reads queue on one CPU. A reader
/// thread per rank (64 at most) reads beside its writer, several at once.
///
/// The read, and the writes to the rank's own log files (no one else's),
/// run beside the supervisor; the rest of what a read brings is handed on
/// (to the tail, the console, the hang clock) under `lock`, the lock the
/// supervisor's loop holds whenever it is not waiting in poll. A pipe is read
/// by one thread at a time, its owner (RankStream::reader), so its bytes
/// keep their order. park() gives every pipe back to the supervisor's thread
/// for the rest of the run, which then reads as it always did: before it
/// judges a rank's exit from its last lines, and at the end.
class PipeReaders {
public:
  /// Hands a read on: `data` from the pipe `s` of `r`; `end` when the pipe
  /// ended (EOF or a read error: it is closed then). Called under the lock.
  using Deliver = std::function<void(RankState& r, RankStream& s, std::string_view data, bool end)>;
  /// Writes a read where only its rank's pipes go (its log files), before
  /// Deliver. Called without the lock, by the pipe's owner: what it touches
  /// must belong to the rank `r` alone, which no other thread reads while
  /// the pipes are a reader's.
  using Write = std::function<void(RankState& r, RankStream& s, std::string_view data)>;

  /// A read of a rank's pipe, the supervisor's or a reader's: as much as the
  /// pipe holds (core/os/pipe_capacity.hpp), so that one read takes all a
  /// rank wrote in bulk, not 16 reads of 64 KiB.
  static constexpr std::size_t k_read_size = std::size_t{1024} * 1024;

  /// `lock`: the supervisor's; `most_threads`: at most this many threads.
  PipeReaders(std::mutex& lock, Write write, Deliver deliver, std::size_t most_threads);
  /// Ends the threads (with the lock not held: the run is unwinding).
  ~PipeReaders();
  PipeReaders(const PipeReaders&) = delete;
  PipeReaders& operator=(const PipeReaders&) = delete;

  /// Whether a pipe may still move to a thread: not once parked.
  bool adopting() const { return !parked_ && most_threads_ > 0; }
  /// Moves the open pipes of rank `r` to a reader thread, the rank's own
  /// (started for it while fewer than `most_threads` run, else shared):
  /// both pipes of a rank in one thread, read in the order the supervisor
  /// reads them, so that its last lines come in the same order. Under the
  /// lock. Leaves the pipes with the caller if no thread starts.
  void adopt(RankState& r);
  /// Takes every pipe back to the caller's thread for the rest of the run,
  /// once each thread has handed on what it read. Under the lock, which is
  /// let go while the threads finish.
  void park();
  /// park(), then ends the threads. Under the lock, let go while they end.
  void stop();
  /// Readable when a thread closed a pipe (the supervisor's loop checks
  /// then whether the run is over); -1 while no thread runs.
  int ended_fd() const { return ended_ ? ended_.get() : -1; }
  /// Empties ended_fd() after poll found it readable.
  void clear_ended() const;

private:
  struct Owned {
    RankState* rank;
    RankStream* stream;
  };
  struct Reader {
    int index = 0;
    UniqueFd wake; ///< an eventfd: park, stop or a new pipe
    std::vector<Owned> pipes;
    std::unique_ptr<char[]> buffer;
    bool busy = false;  ///< between its poll and handing on what it read
    std::thread thread; ///< last: it starts once the members above exist
  };

  Reader* start_reader();
  void run(Reader& me);
  static void wake(const Reader& r);

  std::mutex& lock_;
  Write write_;
  Deliver deliver_;
  std::size_t most_threads_;
  std::vector<std::unique_ptr<Reader>> readers_;
  std::size_t adopted_ = 0; ///< ranks adopted so far: past most_threads_, they share threads in turn
  UniqueFd ended_;
  std::condition_variable_any idle_;    ///< a thread stopped being busy
  std::condition_variable_any stopped_; ///< stopping_ was set
  bool parked_ = false;
  bool stopping_ = false;
};

} // namespace air
