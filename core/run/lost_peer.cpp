#include "core/run/lost_peer.hpp"

#include <array>
#include <string_view>

namespace air {

namespace {

/// What the communication layers print when the other side of a collective
/// is gone. One table: add a library's wording here, nowhere else.
constexpr std::array<std::string_view, 6> k_lost_peer_messages{
    "Connection closed by peer",                          // gloo: the peer process exited
    "Connection reset by peer",                           // gloo and TCPStore: the peer was killed
    "NCCL communicator was aborted",                      // PyTorch's NCCL watchdog
    "remote process exited or there was a network error", // NCCL's ncclRemoteError
    "ncclRemoteError",                                    // NCCL, older wording
    "DistNetworkError",                                   // PyTorch's store client: the store's host is gone
};

} // namespace

bool reports_lost_peer(const std::deque<std::string>& tail) {
  for (const auto& line : tail) {
    for (const std::string_view message : k_lost_peer_messages) {
      if (line.find(message) != std::string::npos) return true;
    }
  }
  return false;
}

} // namespace air
