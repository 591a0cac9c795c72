#include "core/os/log_sink.hpp"

#include "core/base/count_newlines.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace air {

namespace {

/// Waits until `fd` (which someone handed us nonblocking) takes more.
void wait_writable(int fd) {
  pollfd p{fd, POLLOUT, 0};
  while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
  }
}

/// Drops the first `n` bytes of the two pieces.
void consume(std::string_view& first, std::string_view& second, std::size_t n) {
  const std::size_t from_first = std::min(n, first.size());
  first.remove_prefix(from_first);
  second.remove_prefix(std::min(n - from_first, second.size()));
}

} // namespace

bool same_waiting_destination(int a, int b) {
  if (a < 0 || b < 0) return false;
  struct stat sa {};
  struct stat sb {};
  if (::fstat(a, &sa) != 0 || ::fstat(b, &sb) != 0) return false;
  if (S_ISCHR(sa.st_mode) && S_ISCHR(sb.st_mode))
    return sa.st_rdev == sb.st_rdev && sa.st_rdev != makedev(1, 3); // not /dev/null
  const bool waits = S_ISFIFO(sa.st_mode) || S_ISSOCK(sa.st_mode);
  return waits && (sa.st_mode & S_IFMT) == (sb.st_mode & S_IFMT) && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

int write_all(int fd, std::string_view data) { return write_all(fd, data, {}); }

int write_all(int fd, std::string_view first, std::string_view second) {
  while (!first.empty() || !second.empty()) {
    if (first.empty()) std::swap(first, second);
    iovec parts[2] = {{const_cast<char*>(first.data()), first.size()},
                      {const_cast<char*>(second.data()), second.size()}};
    const ssize_t n = ::writev(fd, parts, second.empty() ? 1 : 2);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_writable(fd);
        continue;
      }
      return errno;
    }
    consume(first, second, static_cast<std::size_t>(n));
  }
  return 0;
}

LineSink::LineSink(int fd) : fd_(fd), write_fd_(fd) {
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) {
    discards_ = true; // /dev/null
    return;
  }
  if (S_ISSOCK(st.st_mode)) {
    socket_ = true;
    nonblocking_ = true;
    return;
  }
  regular_file_ = S_ISREG(st.st_mode);
  if (!S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) return; // a file: writes do not wait on a reader
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  private_.reset(::open(self.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (private_) {
    write_fd_ = private_.get();
    nonblocking_ = true;
  } else if ((::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0) {
    nonblocking_ = true; // whoever gave it to us made it nonblocking already
  }
}

long LineSink::write_some(std::string_view first, std::string_view second) {
  ssize_t n;
  do {
    if (socket_) {
      // send() takes one piece; a second one goes out on the next call.
      const std::string_view data = first.empty() ? second : first;
      n = ::send(write_fd_, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    } else {
      iovec parts[2] = {{const_cast<char*>(first.data()), first.size()},
                        {const_cast<char*>(second.data()), second.size()}};
      n = ::writev(write_fd_, parts, 2);
    }
  } while (n < 0 && errno == EINTR);
  if (n > 0) last_progress_ = std::chrono::steady_clock::now();
  return static_cast<long>(n);
}

void LineSink::fail(int err) {
  error_ = err;
  // Part of a batch may have gone out; count each unfinished line as lost.
  const std::string_view rest(pending_.data() + pending_off_, pending_.size() - pending_off_);
  lines_dropped_ += count_newlines(rest);
  pending_.clear();
  pending_off_ = 0;
}

void LineSink::drop(std::string_view first, std::string_view second, std::size_t lines) {
  lines_dropped_ += lines != k_uncounted ? lines : count_newlines(first) + count_newlines(second);
}

void LineSink::write(std::string_view first, std::string_view second, std::size_t lines) {
  if (fd_ < 0 || discards_) return;
  if (error_ != 0) {
    drop(first, second, lines);
    return;
  }
  if (!nonblocking_) {
    const int err = write_all(fd_, first, second);
    if (err != 0) {
      error_ = err;
      drop(first, second, lines); // part of the batch may have gone out; count it as lost
    }
    return;
  }
  if (pending()) {
    if (full()) {
      drop(first, second, lines);
      return;
    }
    pending_.append(first);
    pending_.append(second);
    flush();
    return;
  }
  const long n = write_some(first, second);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
    error_ = errno;
    drop(first, second, lines);
    return;
  }
  consume(first, second, static_cast<std::size_t>(std::max(n, 0L)));
  if (!first.empty() || !second.empty()) {
    pending_.assign(first);
    pending_.append(second);
    pending_off_ = 0;
  }
}

void LineSink::flush() {
  while (pending() && error_ == 0) {
    const std::string_view rest(pending_.data() + pending_off_, pending_.size() - pending_off_);
    const long n = write_some(rest, {});
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail(errno);
      return;
    }
    pending_off_ += static_cast<std::size_t>(n);
  }
  if (!pending()) {
    pending_.clear();
    pending_off_ = 0;
  } else if (pending_off_ > k_console_buffer) {
    pending_.erase(0, pending_off_); // keep the buffer from creeping forward forever
    pending_off_ = 0;
  }
}

void LineSink::finish(int stall_ms) {
  while (pending() && error_ == 0) {
    const std::size_t before = pending_.size() - pending_off_;
    pollfd p{write_fd_, POLLOUT, 0};
    const int ready = ::poll(&p, 1, stall_ms);
    if (ready < 0 && errno == EINTR) continue;
    flush();
    if (ready <= 0 && pending() && pending_.size() - pending_off_ >= before) break; // no progress
  }
  if (pending()) {
    const std::string_view rest(pending_.data() + pending_off_, pending_.size() - pending_off_);
    lines_dropped_ += count_newlines(rest);
    pending_.clear();
    pending_off_ = 0;
  }
}

namespace {

Status make_dirs(const std::string& dir) {
  if (dir.empty()) return ok_status();
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return ok_status();
    return sys_error("mkdir " + dir, ENOTDIR);
  }
  const auto slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) AIR_TRY(make_dirs(dir.substr(0, slash)));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir " + dir, errno);
  return ok_status();
}

} // namespace

Expected<UniqueFd> open_log_file(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) AIR_TRY(make_dirs(path.substr(0, slash)));
  // Never through a symlink (O_NOFOLLOW), never into a file another user left
  // in a shared log directory, never into a second name of some other file:
  // a planted name could otherwise make air-run overwrite what it points at.
  // O_NONBLOCK: a FIFO planted at the name fails at once instead of blocking.
  UniqueFd fd(
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644));
  if (!fd) {
    if (errno == ELOOP) return usage_error("log file " + path + " is a symlink; air-run does not follow it");
    return sys_error("open " + path, errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_error("fstat " + path, errno);
  if (S_ISREG(st.st_mode)) {
    if (st.st_uid != ::geteuid() || st.st_nlink > 1) {
      return usage_error("log file " + path + " was left there by uid " + std::to_string(st.st_uid) +
                         (st.st_nlink > 1 ? " with another name (a hard link)" : "") +
                         "; air-run writes only files of its own");
    }
    // Only a file that holds something: on ext4, truncating marks the file
    // to be written out when closed (its guard for files replaced by
    // truncation), which made the end of a run write every log to disk.
    if (st.st_size > 0 && ::ftruncate(fd.get(), 0) != 0) return sys_error("ftruncate " + path, errno);
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

} // namespace air
