#pragma once

#include <unistd.h>

#include <utility>

namespace air {

/// Owns one file descriptor and closes it on destruction. Move-only, so an fd
/// has exactly one owner and is closed exactly once; every fd the supervisor
/// creates lives in one of these, so no fd leaks by construction.
class UniqueFd {
public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }

  /// The descriptor, or -1 when empty.
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  /// Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }

  /// Closes the current fd (if any) and takes `fd`. close() is not retried on
  /// EINTR: on Linux the fd is released even then, and a retry could close an
  /// fd another part of the program just opened.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_ = -1;
};

} // namespace air
