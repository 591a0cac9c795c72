#pragma once

#include "core/base/error.hpp"
#include "core/base/unique_fd.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace air {

/// Writes batches of whole lines to one fd: the console (not owned) or a
/// per-rank log file (owned). Each batch goes out through one write loop
/// with nothing else written in between, so a line is never interleaved
/// mid-line with another rank's. The first write error (EPIPE from a closed
/// `| head`, ENOSPC, ...) stops this sink for good: the supervisor keeps
/// supervising, and the lines it could not deliver are counted.
///
/// Writes block while the fd is full (a paused terminal pauses the echo and,
/// behind it, the ranks' output, as with any pipe); the fd is never switched
/// to O_NONBLOCK because that flag would be shared with whoever else holds
/// the terminal.
class LineSink {
public:
  LineSink() = default;
  /// A sink on an fd owned elsewhere (the console). -1 = discard silently.
  explicit LineSink(int fd) : fd_(fd) {}
  /// A sink that owns its fd (a log file).
  explicit LineSink(UniqueFd owned) : owned_(std::move(owned)) { fd_ = owned_.get(); }

  /// Writes `batch`, which holds `lines` complete '\n'-terminated lines.
  void write(std::string_view batch, std::size_t lines);

  bool broken() const { return error_ != 0; }
  int error() const { return error_; } ///< errno of the failed write, 0 if none
  std::uint64_t lines_dropped() const { return lines_dropped_; }

private:
  int fd_ = -1;
  UniqueFd owned_;
  int error_ = 0;
  std::uint64_t lines_dropped_ = 0;
};

/// Writes all of `data` to `fd`, retrying on EINTR, partial writes and
/// EAGAIN (waiting for POLLOUT). Returns 0 or the errno that stopped it.
int write_all(int fd, std::string_view data);

/// Opens (truncating) a per-rank log file, creating missing parent
/// directories; close-on-exec. A symlink at the path, a regular file owned by
/// another user or one with a second name is refused (usage error naming
/// it), so names planted in a shared log directory are never written
/// through; a device the user names (/dev/null) is used as is. Errors name
/// the call and the path:
/// "open /x/rank0.log: Permission denied".
Expected<UniqueFd> open_log_file(const std::string& path);

} // namespace air
