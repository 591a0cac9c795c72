#include "core/os/file_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace air {
namespace {

FileRead unreadable(const std::string& path, const std::string& why) {
  FileRead r;
  r.state = FileRead::State::unreadable;
  r.error = "cannot read " + path + ": " + why;
  return r;
}

} // namespace

FileRead read_small_file(const std::string& path, std::uint64_t max_bytes, FileWriter writer) {
  // O_NONBLOCK: a FIFO planted at the path would otherwise block open() forever.
  const int follow = writer == FileWriter::us ? O_NOFOLLOW : 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | follow);
  if (fd < 0) {
    if (errno == ENOENT) return {};
    if (errno == ELOOP && writer == FileWriter::us)
      return unreadable(path, "a symlink, not a file a rank wrote");
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
  if (writer == FileWriter::us && st.st_uid != ::geteuid()) {
    ::close(fd);
    return unreadable(path,
                      "owned by uid " + std::to_string(st.st_uid) + ", not written by this run's ranks");
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
