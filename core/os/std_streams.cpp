#include "core/os/std_streams.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace air {

Status open_standard_streams() {
  for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // open() returns the lowest free descriptor, which is `fd`: lower ones are open by now.
    const int opened = ::open("/dev/null", O_RDWR);
    if (opened < 0)
      return Error{ErrorKind::system, std::string("cannot open /dev/null for a closed standard stream: ") +
                                          std::strerror(errno)};
    if (opened != fd) {
      // Not expected (something raced us); move it where it belongs.
      const int moved = ::dup2(opened, fd);
      const int err = errno;
      ::close(opened);
      if (moved < 0)
        return Error{ErrorKind::system,
                     std::string("cannot open /dev/null for a closed standard stream: dup2: ") +
                         std::strerror(err)};
    }
  }
  return ok_status();
}

} // namespace air
