#include "core/os/log_sink.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

void LineSink::write(std::string_view batch, std::size_t lines) {
  if (fd_ < 0) return;
  if (error_ != 0) {
    lines_dropped_ += lines;
    return;
  }
  const int err = write_all(fd_, batch);
  if (err != 0) {
    error_ = err;
    lines_dropped_ += lines; // part of the batch may have gone out; count it as lost
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
  // A fresh file, never one found at the name: O_EXCL|O_NOFOLLOW so that a
  // symlink planted in a shared log directory cannot make air-run overwrite
  // another file, and a file another user left there is not written into.
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return usage_error("cannot replace log file " + path +
                       " left by an earlier run: " + std::strerror(errno));
  }
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd) return sys_error("open " + path, errno);
  return fd;
}

} // namespace air
