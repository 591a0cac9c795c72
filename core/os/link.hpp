#pragma once

#include "core/base/error.hpp"
#include "core/base/unique_fd.hpp"

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// One TCP connection that carries text lines, as the multi-node control
/// channel uses it: non-blocking reads split into lines (control characters
/// stripped, a line over the cap ends the connection), whole short sends
/// without SIGPIPE, a closed state and the time the peer was last heard.
/// "Closed" means nothing more will come or go; the descriptor itself stays
/// open until the Link is destroyed, so a peer's last bytes are not turned
/// into a reset. Not thread-safe.
class Link {
public:
  using Clock = std::chrono::steady_clock;

  /// A line longer than this is not the protocol: the connection is closed.
  static constexpr std::size_t k_max_line = 8192;

  Link() = default;
  /// Takes a connected, non-blocking socket; `now` counts as last heard.
  explicit Link(UniqueFd fd, Clock::time_point now = {}) : fd_(std::move(fd)), last_heard_(now) {}

  /// The socket, for poll (-1 when none).
  int fd() const { return fd_.get(); }
  bool closed() const { return closed_; }
  /// Marks the connection closed: it is neither read nor written again.
  void close() { closed_ = true; }
  /// When a byte last came (or when the caller said so with heard_at).
  Clock::time_point last_heard() const { return last_heard_; }
  void heard_at(Clock::time_point when) { last_heard_ = when; }

  /// Reads whatever is ready (at most 64 KiB, so a flooding peer cannot keep
  /// the caller reading) and returns the complete lines, those put back with
  /// keep_unread first. Marks the link closed on EOF, on an error, and on a
  /// line too long to be the protocol's.
  std::vector<std::string> read_lines();
  /// Lines already read that belong to the caller's next phase: the next
  /// read_lines hands them out first, so none is lost.
  void keep_unread(std::vector<std::string> lines) { unread_ = std::move(lines); }

  /// Sends `text` whole, waiting briefly while the socket buffer is full.
  /// false: the link is closed, or the peer is gone or stuck.
  bool send(std::string_view text);
  /// As send, also on a link marked closed: the join handshake answers a
  /// connection whose last lines came together with its EOF.
  bool send_even_if_closed(std::string_view text);
  /// Half-closes: the peer sees EOF, what it still sends can be read.
  void shut_down_writes();

private:
  UniqueFd fd_;
  std::string in_; ///< received bytes not yet split into lines
  std::vector<std::string> unread_;
  bool closed_ = false;
  Clock::time_point last_heard_{};
};

/// Milliseconds from `now` to `deadline` for poll: 0 when past, at most 60 s.
int poll_timeout(std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point deadline);

/// poll(2), retried on EINTR.
int poll_retry(pollfd* fds, std::size_t count, int timeout_ms);

/// Listens on `port` on every interface (IPv6 dual stack, else IPv4).
/// Errors name the call and `what` ("bind (control port 29501)");
/// `*in_use` (when given) says that the port was taken (EADDRINUSE).
Expected<UniqueFd> listen_tcp(int port, const std::string& what, bool* in_use = nullptr);

/// One connection attempt to host:port within `timeout`, non-blocking and
/// with TCP_NODELAY; an empty UniqueFd and the reason in `error` when it fails.
UniqueFd connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout,
                     std::string& error);

/// What one accept on a listener gave: a non-blocking connection with
/// TCP_NODELAY and its address without the port, or the errno.
struct Accepted {
  UniqueFd fd;
  std::string source; ///< "127.0.0.1", "::ffff:10.0.0.5"; "" when unknown
  int error = 0;
};
Accepted accept_tcp(int listener);

/// Takes one waiting connection and closes it at once: used with a spare
/// descriptor freed, when the process ran out of them. false: none taken.
bool accept_and_close(int listener);

/// A descriptor held in reserve (/dev/null): when accept fails for want of
/// descriptors, closing it makes room to take the waiting connection.
UniqueFd spare_descriptor();

/// 32 random hex digits (getrandom; a run id pair when that fails), for a
/// join challenge.
std::string random_nonce();

} // namespace air
