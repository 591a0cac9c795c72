// One TCP connection carrying text lines, and the socket calls around it.
#include "core/os/link.hpp"

#include "core/base/text.hpp"
#include "core/os/host.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// Bytes taken from one socket per read: a peer that floods cannot keep the
/// agent reading (the rest waits in the kernel for the next poll).
constexpr std::size_t k_max_read_per_call = 65536;

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/// The address a connection comes from, without its port: what the
/// per-source limits count ("" when unknown).
std::string source_address(const sockaddr_storage& from) {
  char text[INET6_ADDRSTRLEN] = {};
  if (from.ss_family == AF_INET6) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, &from, sizeof in6);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
  } else if (from.ss_family == AF_INET) {
    sockaddr_in in4{};
    std::memcpy(&in4, &from, sizeof in4);
    ::inet_ntop(AF_INET, &in4.sin_addr, text, sizeof text);
  }
  return text;
}

/// Sends a whole (short) message without SIGPIPE, waiting briefly when the
/// socket buffer is full. false: the peer is gone or stuck.
bool send_all(int fd, std::string_view data) {
  std::size_t sent = 0;
  int stalls = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && stalls++ < 5) {
      pollfd p{fd, POLLOUT, 0};
      poll_retry(&p, 1, 100);
      continue;
    }
    return false;
  }
  return true;
}

} // namespace

std::vector<std::string> Link::read_lines() {
  std::vector<std::string> lines = std::move(unread_);
  unread_.clear();
  if (closed_) return lines;
  char buf[4096];
  for (std::size_t taken = 0; taken < k_max_read_per_call;) {
    const ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, static_cast<std::size_t>(n));
      last_heard_ = Clock::now();
      taken += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    closed_ = true; // 0: EOF; <0: reset or another error
    break;
  }
  std::size_t start = 0;
  // Peer text reaches terminals and reports: no control characters survive.
  for (std::size_t nl; (nl = in_.find('\n', start)) != std::string::npos; start = nl + 1) {
    if (nl - start > k_max_line) {
      closed_ = true;
      break;
    }
    lines.push_back(strip_control_characters(std::string_view(in_).substr(start, nl - start)));
  }
  in_.erase(0, start);
  if (in_.size() > k_max_line) closed_ = true;
  return lines;
}

bool Link::send(std::string_view text) { return !closed_ && send_all(fd_.get(), text); }

bool Link::send_even_if_closed(std::string_view text) { return send_all(fd_.get(), text); }

void Link::shut_down_writes() { ::shutdown(fd_.get(), SHUT_WR); }

int poll_timeout(Clock::time_point now, Clock::time_point deadline) {
  const auto wait = std::chrono::ceil<milliseconds>(deadline - now).count();
  return static_cast<int>(std::clamp<long long>(wait, 0, 60'000));
}

int poll_retry(pollfd* fds, std::size_t count, int timeout_ms) {
  int r;
  do {
    r = ::poll(fds, count, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r;
}

Expected<UniqueFd> listen_tcp(int port, const std::string& what, bool* in_use) {
  int family = AF_INET6;
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) {
    family = AF_INET;
    fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  }
  if (!fd) return sys_error(fmt::format("socket ({})", what), errno);
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (family == AF_INET6) {
    int zero = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_addr = in6addr_any;
    sa.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)); // NOLINT
  } else {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    sa.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)); // NOLINT
  }
  if (rc != 0) {
    const int err = errno;
    if (in_use != nullptr) *in_use = err == EADDRINUSE;
    return sys_error(fmt::format("bind ({} {})", what, port), err);
  }
  if (::listen(fd.get(), 128) != 0) return sys_error(fmt::format("listen ({})", what), errno);
  return fd;
}

UniqueFd connect_tcp(const std::string& host, int port, milliseconds timeout, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    error = fmt::format("cannot resolve '{}': {}", host, ::gai_strerror(rc));
    return UniqueFd();
  }
  UniqueFd result;
  for (addrinfo* ai = res; ai != nullptr && !result; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd) {
      error = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        error = std::strerror(errno);
        continue;
      }
      pollfd p{fd.get(), POLLOUT, 0};
      if (poll_retry(&p, 1, static_cast<int>(timeout.count())) <= 0) {
        error = "connection timed out";
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        error = std::strerror(err);
        continue;
      }
    }
    set_nodelay(fd.get());
    result = std::move(fd);
    error.clear();
  }
  ::freeaddrinfo(res);
  return result;
}

Accepted accept_tcp(int listener) {
  Accepted accepted;
  sockaddr_storage from{};
  socklen_t from_len = sizeof from;
  accepted.fd.reset(::accept4(listener, reinterpret_cast<sockaddr*>(&from), &from_len, // NOLINT
                              SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!accepted.fd) {
    accepted.error = errno;
    return accepted;
  }
  set_nodelay(accepted.fd.get());
  accepted.source = source_address(from);
  return accepted;
}

bool accept_and_close(int listener) {
  const UniqueFd dropped(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  return dropped.valid();
}

UniqueFd spare_descriptor() { return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

std::string random_nonce() {
  unsigned char bytes[16] = {};
  std::size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    filled += static_cast<std::size_t>(n);
  }
  if (filled < sizeof bytes) return make_run_id() + make_run_id(); // /dev/urandom, else pid and clock
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

} // namespace air
