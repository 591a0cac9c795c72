#include "core/os/file_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace air {
namespace {

FileRead unreadable(const std::string& path, const std::string& why) {
  FileRead r;
  r.state = FileRead::State::unreadable;
  r.error = "cannot read " + path + ": " + why;
  return r;
}

} // namespace

FileRead read_small_file(const std::string& path, std::uint64_t max_bytes) {
  // O_NONBLOCK: a FIFO planted at the path would otherwise block open() forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    return unreadable(path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return unreadable(path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return unreadable(path, "not a regular file");
  }
  FileRead r;
  r.size = static_cast<std::uint64_t>(st.st_size);
  if (r.size > max_bytes) {
    ::close(fd);
    r.state = FileRead::State::too_large;
    return r;
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return unreadable(path, std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) { // grew after fstat
      ::close(fd);
      r.state = FileRead::State::too_large;
      r.size = text.size();
      return r;
    }
  }
  ::close(fd);
  r.state = FileRead::State::ok;
  r.size = text.size();
  r.text = std::move(text);
  return r;
}

} // namespace air
