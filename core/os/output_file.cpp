#include "core/os/output_file.hpp"

#include "core/os/atomic_file.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <cstring>

namespace air {
namespace {

Error write_error(const std::string& what, const char* call, int err) {
  return {ErrorKind::system, "cannot write " + what + ": " + call + ": " + std::strerror(err)};
}

/// SIGPIPE ignored while it lives: a reader that went away makes a write fail
/// with EPIPE (an error air-run reports) instead of killing air-run.
class IgnoreSigpipe {
public:
  IgnoreSigpipe() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    restore_ = ::sigaction(SIGPIPE, &ignore, &old_) == 0;
  }
  ~IgnoreSigpipe() {
    if (restore_) ::sigaction(SIGPIPE, &old_, nullptr);
  }
  IgnoreSigpipe(const IgnoreSigpipe&) = delete;
  IgnoreSigpipe& operator=(const IgnoreSigpipe&) = delete;

private:
  struct sigaction old_ {};
  bool restore_ = false;
};

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/// Opens a device, FIFO or terminal for writing without waiting: a FIFO with
/// no reader is ENXIO at once. The descriptor is made blocking again after.
Status write_in_place(const std::string& path, std::string_view content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENXIO)
      return Error{ErrorKind::system, "cannot write " + path + ": no process reads this FIFO"};
    return write_error(path, "open", errno);
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    ::close(fd); // it became a regular file meanwhile: replace it as one
    return write_file_atomically(path, content);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  Status written = write_to_fd(fd, content, path);
  if (::close(fd) != 0 && written) written = write_error(path, "close", errno);
  return written;
}

} // namespace

OutputTarget output_target(const std::string& path) {
  OutputTarget target;
  target.path = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // Nothing there (or a symlink pointing nowhere): created by the write.
    struct stat link {};
    if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode))
      target.kind = OutputTarget::Kind::in_place;
    return target;
  }
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat stream {};
    if (::fstat(fd, &stream) == 0 && same_file(st, stream)) {
      target.kind = OutputTarget::Kind::stream;
      target.fd = fd;
      return target;
    }
  }
  if (!S_ISREG(st.st_mode)) {
    target.kind = OutputTarget::Kind::in_place;
    return target;
  }
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    // Replace the file the link points to, not the link: the link is someone's setup.
    if (char* resolved = ::realpath(path.c_str(), nullptr)) {
      target.path = resolved;
      std::free(resolved);
    }
  }
  return target;
}

Status write_output_file(const std::string& path, std::string_view content, bool durable) {
  const OutputTarget target = output_target(path);
  switch (target.kind) {
  case OutputTarget::Kind::replace:
    return write_file_atomically(target.path, content, durable);
  case OutputTarget::Kind::stream:
    return write_to_fd(target.fd, content, path);
  case OutputTarget::Kind::in_place:
    break;
  }
  if (struct stat st{}; ::stat(path.c_str(), &st) != 0) {
    // A symlink pointing nowhere: create its target, as `>` would.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC, 0666);
    if (fd < 0) return write_error(path, "open", errno);
    Status written = write_to_fd(fd, content, path);
    if (::close(fd) != 0 && written) written = write_error(path, "close", errno);
    return written;
  }
  return write_in_place(path, content);
}

Status append_to_file(const std::string& path, std::string_view content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOCTTY | O_CLOEXEC, 0666);
  if (fd < 0) return write_error(path, "open", errno);
  Status written = write_to_fd(fd, content, path);
  if (::close(fd) != 0 && written) written = write_error(path, "close", errno);
  return written;
}

Status write_to_fd(int fd, std::string_view content, const std::string& what) {
  const IgnoreSigpipe ignore_sigpipe;
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), std::min<std::size_t>(content.size(), SSIZE_MAX));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd pfd{fd, POLLOUT, 0};
        ::poll(&pfd, 1, -1);
        continue;
      }
      return write_error(what, "write", errno);
    }
    if (n == 0) return write_error(what, "write", EIO);
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return ok_status();
}

} // namespace air
