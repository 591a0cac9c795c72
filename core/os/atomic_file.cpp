#include "core/os/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace air {
namespace {

Error write_error(const std::string& path, const char* call, int err) {
  return {ErrorKind::system, "cannot write " + path + ": " + call + ": " + std::strerror(err)};
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A name no other writer uses: pid plus a process-wide counter; O_EXCL catches
// anything left behind by a crashed writer with a recycled pid.
std::string temp_name(const std::string& path, unsigned attempt) {
  static std::atomic<unsigned> counter{0};
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + base + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1)) +
         "." + std::to_string(attempt);
}

Status write_all(int fd, std::string_view content, const std::string& path) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return write_error(path, "write", errno);
    }
    content.remove_prefix(static_cast<std::size_t>(n));
  }
  return ok_status();
}

} // namespace

Status write_file_atomically(const std::string& path, std::string_view content, bool durable) {
  if (path.empty()) return Error{ErrorKind::system, "cannot write a file with an empty path"};
  std::string tmp;
  int fd = -1;
  for (unsigned attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    tmp = temp_name(path, attempt);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) return write_error(path, "open", errno);
  }
  if (fd < 0) return write_error(path, "open", EEXIST);

  Status written = write_all(fd, content, path);
  // fsync before rename: otherwise a crash can leave the new name pointing at
  // an empty file on file systems that reorder metadata and data.
  if (written && durable && ::fsync(fd) != 0) written = write_error(path, "fsync", errno);
  if (::close(fd) != 0 && written) written = write_error(path, "close", errno);
  if (written && ::rename(tmp.c_str(), path.c_str()) != 0) written = write_error(path, "rename", errno);
  if (!written) {
    ::unlink(tmp.c_str());
    return written;
  }
  if (!durable) return ok_status();
  // Make the rename itself durable; a directory that cannot be fsync'ed (some
  // network file systems) does not make the write fail.
  const int dir_fd = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return ok_status();
}

} // namespace air
