#pragma once

#include "core/base/error.hpp"
#include "core/base/unique_fd.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace air {

/// Writes batches of whole lines to one fd: the console (not owned) or a
/// per-rank log file (owned). Each batch goes out whole, with nothing else
/// written in between, so a line is never interleaved mid-line with another
/// rank's. The first write error (EPIPE from a closed `| head`, ENOSPC, ...)
/// stops this sink for good: the supervisor keeps supervising, and the lines
/// it could not deliver are counted.
///
/// A console sink never blocks: air-run must keep supervising (timeout,
/// signals, teardown) even when nobody reads its stdout. A pipe, FIFO,
/// terminal or socket is written through a private nonblocking handle
/// (reopened through /proc/self/fd, or send(MSG_DONTWAIT) for a socket; the
/// O_NONBLOCK flag of the shared fd is never touched, whoever else holds the
/// terminal keeps blocking writes). What the fd does not take at once waits in
/// a buffer; once that holds k_console_buffer bytes full() says so and the
/// supervisor stops reading the ranks' pipes, so a slow reader slows the ranks
/// as any pipe would, and nothing is lost. Only output that air-run must take
/// while the buffer is full (a rank's last lines during a teardown) and what
/// is still buffered when finish() gives up is dropped, and counted. A regular
/// file (and anything that cannot be reopened) is written with blocking writes.
/// Log files are regular files: plain blocking writes.
class LineSink {
public:
  LineSink() = default;
  /// A sink on an fd owned elsewhere (the console). -1 = discard silently.
  explicit LineSink(int fd);
  /// A sink that owns its fd (a log file).
  explicit LineSink(UniqueFd owned) : owned_(std::move(owned)) { fd_ = owned_.get(); }

  /// `lines` for a batch whose lines the caller did not count: they are
  /// counted only if the batch is dropped (a scan of every byte the common
  /// case does not need).
  static constexpr std::size_t k_uncounted = static_cast<std::size_t>(-1);

  /// Writes `batch`, which holds `lines` newlines (or k_uncounted): whole
  /// lines on the console; for a log, a rank's bytes as they came
  /// (core/base/log_chunker.hpp).
  void write(std::string_view batch, std::size_t lines) { write(batch, {}, lines); }
  /// Writes `first` then `second` as one batch (one writev, no joined copy),
  /// `lines` newlines in both together.
  void write(std::string_view first, std::string_view second, std::size_t lines);

  /// Whether the fd is /dev/null: what is written to it can be skipped
  /// unbuilt (the console of a run whose output nobody keeps).
  bool discards() const { return discards_; }
  /// Whether a write never waits for a reader: /dev/null or a regular file
  /// (no buffer fills, nothing is held back).
  bool never_waits() const { return discards_ || regular_file_; }

  /// Bytes that wait for the fd to accept them (console sinks only).
  bool pending() const { return pending_.size() > pending_off_; }
  /// The buffer is full: stop reading what would be written here.
  bool full() const { return pending_.size() - pending_off_ >= k_console_buffer; }
  /// The fd to poll for POLLOUT while pending().
  int poll_fd() const { return write_fd_; }
  /// Writes as much of the buffer as the fd takes now.
  void flush();
  /// When the fd last took some bytes (or the sink was made).
  std::chrono::steady_clock::time_point last_progress() const { return last_progress_; }
  /// The end of the run: flushes the buffer, waiting while the reader makes
  /// progress, and drops (counting the lines) what is left once it has made
  /// none for `stall` milliseconds.
  void finish(int stall_ms);

  bool broken() const { return error_ != 0; }
  int error() const { return error_; } ///< errno of the failed write, 0 if none
  std::uint64_t lines_dropped() const { return lines_dropped_; }

  /// How many bytes a console sink buffers before full() (1 MiB).
  static constexpr std::size_t k_console_buffer = 1U << 20;

private:
  /// Nonblocking write of what the fd takes: bytes written, or -1 with errno.
  long write_some(std::string_view first, std::string_view second);
  void fail(int err);
  /// Counts `lines` dropped: `batch`'s newlines when the caller did not count them.
  void drop(std::string_view first, std::string_view second, std::size_t lines);

  int fd_ = -1;
  UniqueFd owned_;
  int write_fd_ = -1;        ///< where console writes go (the private handle, or fd_)
  UniqueFd private_;         ///< the reopened nonblocking handle, if any
  bool nonblocking_ = false; ///< write_fd_ never blocks (private handle or socket)
  bool socket_ = false;
  bool discards_ = false;
  bool regular_file_ = false;
  std::string pending_;
  std::size_t pending_off_ = 0;
  std::chrono::steady_clock::time_point last_progress_ = std::chrono::steady_clock::now();
  int error_ = 0;
  std::uint64_t lines_dropped_ = 0;
};

/// Whether `a` and `b` lead to the same terminal, pipe or socket (as with
/// `2>&1`): what waits to be written to one must come out before anything
/// written to the other, so such a pair takes one LineSink. Regular files
/// and /dev/null never make a write wait: false for them.
bool same_waiting_destination(int a, int b);

/// Writes all of `data` to `fd`, retrying on EINTR, partial writes and
/// EAGAIN (waiting for POLLOUT). Returns 0 or the errno that stopped it.
int write_all(int fd, std::string_view data);
/// The same for `first` followed by `second`, through writev.
int write_all(int fd, std::string_view first, std::string_view second);

/// Opens (truncating) a per-rank log file, creating missing parent
/// directories; close-on-exec. A symlink at the path, a regular file owned by
/// another user or one with a second name is refused (usage error naming
/// it), so names planted in a shared log directory are never written
/// through; a device the user names (/dev/null) is used as is. Errors name
/// the call and the path:
/// "open /x/rank0.log: Permission denied".
Expected<UniqueFd> open_log_file(const std::string& path);

} // namespace air
