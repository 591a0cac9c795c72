// A run's own log folder: a reused run id gets a new one, never another run's.
#include "core/os/run_folder.hpp"

#include "core/os/host.hpp"
#include "core/os/log_sink.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace air {

namespace {

constexpr int k_max_folders = 1000;

/// What the marker says: enough to find the run that holds the folder.
std::string marker_text(int node_rank) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return fmt::format("air-run node {} pid {} host {} started {}\n", node_rank, ::getpid(), host,
                     static_cast<long long>(std::time(nullptr)));
}

} // namespace

Expected<std::string> claim_run_folder(const std::string& folder, int node_rank) {
  for (int n = 0; n < k_max_folders; ++n) {
    const std::string candidate = n == 0 ? folder : fmt::format("{}.{}", folder, n);
    AIR_TRY(make_directories(candidate));
    const std::string marker = fmt::format("{}/.air-run-node{}", candidate, node_rank);
    const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue; // an earlier or concurrent run's folder: the next one
    if (fd < 0) return sys_error("open " + marker, errno);
    const int err = write_all(fd, marker_text(node_rank));
    ::close(fd);
    if (err != 0) return sys_error("write " + marker, err);
    return candidate;
  }
  return usage_error(fmt::format("log folders {} to {}.{} are all taken by earlier runs with this run id; "
                                 "give this run another --run-id or --log-dir",
                                 folder, folder, k_max_folders - 1));
}

} // namespace air
