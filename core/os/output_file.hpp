#pragma once

#include "core/base/error.hpp"

#include <string>
#include <string_view>

namespace air {

/// How a report for a path the user named is written.
struct OutputTarget {
  enum class Kind {
    replace,  ///< a regular file, or nothing yet: written atomically (atomic_file.hpp) at `path`
    in_place, ///< a device, FIFO, terminal or socket: opened and written as it is, never replaced
    stream,   ///< air-run's own stdout or stderr (`/dev/stdout`, `/proc/self/fd/1`, ...): `fd`
  };
  Kind kind = Kind::replace;
  /// replace: the file to replace, a symlink resolved to its target (the link
  /// stays); in_place: the path as given.
  std::string path;
  int fd = -1; ///< stream: 1 or 2
};

/// Decides how `path` is written (see OutputTarget). A missing file, or a
/// symlink that points nowhere, is a regular file to create (the link's
/// target is created in place, as a shell's `>` does).
OutputTarget output_target(const std::string& path);

/// Writes a report file that the user named. A regular file is replaced
/// atomically, so a reader never sees half a report; anything else is written
/// in place: `--summary /dev/null` leaves the device alone even as root, a FIFO
/// a collector reads gets the bytes (and no reader is an error, not a hang),
/// and `/dev/stdout` goes down air-run's own stdout. Every byte is checked: a
/// full device, a closed pipe (EPIPE, never SIGPIPE) or a short write is an
/// error naming the path: "cannot write /dev/full: write: No space left on device".
/// `durable` false: a regular file is replaced without fsync (write_file_atomically).
Status write_output_file(const std::string& path, std::string_view content, bool durable = true);

/// Appends `content` to `path` (created when missing) in one checked write
/// sequence; for files others append to as well (GitHub's step summary).
Status append_to_file(const std::string& path, std::string_view content);

/// Writes all of `content` to `fd` (retrying short writes and EINTR, waiting
/// while a nonblocking fd is full). A closed pipe is EPIPE, not SIGPIPE.
/// Errors name `what`: "cannot write stdout: write: Broken pipe".
Status write_to_fd(int fd, std::string_view content, const std::string& what);

} // namespace air
