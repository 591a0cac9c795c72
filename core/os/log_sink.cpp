#include "core/os/log_sink.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace air {

int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        // Someone handed us a nonblocking fd: wait until it drains.
        pollfd p{fd, POLLOUT, 0};
        while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
        }
        continue;
      }
      return errno;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

LineSink::LineSink(int fd) : fd_(fd), write_fd_(fd) {
  if (fd < 0) return;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return;
  if (S_ISSOCK(st.st_mode)) {
    socket_ = true;
    nonblocking_ = true;
    return;
  }
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

long LineSink::write_some(std::string_view data) {
  ssize_t n;
  do {
    n = socket_ ? ::send(write_fd_, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL)
                : ::write(write_fd_, data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  if (n > 0) last_progress_ = std::chrono::steady_clock::now();
  return static_cast<long>(n);
}

void LineSink::fail(int err) {
  error_ = err;
  // Part of a batch may have gone out; count each unfinished line as lost.
  const std::string_view rest(pending_.data() + pending_off_, pending_.size() - pending_off_);
  lines_dropped_ += static_cast<std::uint64_t>(std::count(rest.begin(), rest.end(), '\n'));
  pending_.clear();
  pending_off_ = 0;
}

void LineSink::write(std::string_view batch, std::size_t lines) {
  if (fd_ < 0) return;
  if (error_ != 0) {
    lines_dropped_ += lines;
    return;
  }
  if (!nonblocking_) {
    const int err = write_all(fd_, batch);
    if (err != 0) {
      error_ = err;
      lines_dropped_ += lines; // part of the batch may have gone out; count it as lost
    }
    return;
  }
  if (pending()) {
    if (full()) {
      lines_dropped_ += lines;
      return;
    }
    pending_.append(batch);
    flush();
    return;
  }
  const long n = write_some(batch);
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
    error_ = errno;
    lines_dropped_ += lines;
    return;
  }
  const auto written = static_cast<std::size_t>(std::max(n, 0L));
  if (written < batch.size()) {
    pending_.assign(batch.substr(written));
    pending_off_ = 0;
  }
}

void LineSink::flush() {
  while (pending() && error_ == 0) {
    const std::string_view rest(pending_.data() + pending_off_, pending_.size() - pending_off_);
    const long n = write_some(rest);
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
    lines_dropped_ += static_cast<std::uint64_t>(std::count(rest.begin(), rest.end(), '\n'));
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
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return sys_error("open " + path, errno);
  return fd;
}

} // namespace air
