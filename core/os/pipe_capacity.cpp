// Pipe capacity: how large the ranks' output pipes are made.
#include "core/os/pipe_capacity.hpp"

#include "core/os/file_read.hpp"

#include <fcntl.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace air {

namespace {

constexpr std::size_t k_default_pipe = std::size_t{64} * 1024; ///< the kernel's, 16 pages
constexpr std::size_t k_largest_output_pipe = std::size_t{1} << 20;
constexpr std::size_t k_page = 4096; ///< fs.pipe-user-pages-soft counts pages of this size

/// The number in a /proc/sys file, or `fallback` when it cannot be read.
std::size_t read_limit(const char* path, std::size_t fallback) {
  const FileRead file = read_small_file(path, 64);
  if (file.state != FileRead::State::ok) return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(file.text.c_str(), &end, 10);
  return end == file.text.c_str() ? fallback : static_cast<std::size_t>(value);
}

} // namespace

std::size_t output_pipe_size(std::size_t pipes, const PipeLimits& limits) {
  if (pipes == 0) return 0;
  std::size_t most = std::min(k_largest_output_pipe, limits.max_bytes);
  if (limits.user_soft_bytes > 0) most = std::min(most, limits.user_soft_bytes / 4 / pipes);
  std::size_t size = k_default_pipe;
  while (size * 2 <= most) size *= 2;
  return size > k_default_pipe ? size : 0;
}

const PipeLimits& pipe_limits() {
  static const PipeLimits limits{
      read_limit("/proc/sys/fs/pipe-max-size", k_largest_output_pipe),
      read_limit("/proc/sys/fs/pipe-user-pages-soft", 16384) * k_page,
  };
  return limits;
}

void set_pipe_size(int fd, std::size_t bytes) {
  if (bytes > 0) ::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(bytes));
}

} // namespace air
