// air-run's own HTTP/1.1 client, for plain http:// without a proxy: what a
// tracking server on loopback or on the cluster's network is. libcurl stays
// for HTTPS and proxies, but loading it (30 libraries: OpenSSL, GnuTLS,
// Kerberos, LDAP, SSH) took 25 to 60 ms of a launch's critical path; a request
// here costs a socket, a connect and two system calls.
#include "core/mlflow/plain_http.hpp"

#include "core/base/text.hpp"
#include "core/base/unique_fd.hpp"

#include <fmt/format.h>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace air::mlflow {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t k_max_head = 64 * 1024;          ///< status line and headers together
constexpr std::chrono::milliseconds k_abort_slice{20}; ///< how often a wait asks abort_check

bool valid_port(std::string_view port) {
  return !port.empty() && port.size() <= 5 && all_digits(port) && std::stoi(std::string(port)) <= 65535;
}

/// The value of a header line `Name: value` when its name is `name` (any case).
std::optional<std::string_view> header_value(std::string_view line, std::string_view name) {
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || lower(trim(line.substr(0, colon))) != name) return std::nullopt;
  return trim(line.substr(colon + 1));
}

} // namespace

std::optional<PlainUrl> parse_plain_url(std::string_view url) {
  constexpr std::string_view scheme = "http://";
  if (url.size() < scheme.size() || lower(url.substr(0, scheme.size())) != scheme) return std::nullopt;
  url.remove_prefix(scheme.size());
  if (url.find('#') != std::string_view::npos) return std::nullopt;
  const auto path_at = url.find_first_of("/?");
  PlainUrl out;
  out.authority = std::string(url.substr(0, path_at));
  out.target = path_at == std::string_view::npos ? "/" : std::string(url.substr(path_at));
  if (out.target.front() == '?') out.target.insert(0, "/");
  std::string_view authority = out.authority;
  if (authority.empty() || authority.find('@') != std::string_view::npos) return std::nullopt;
  std::string_view port = "80";
  if (authority.front() == '[') { // [IPv6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos || close == 1) return std::nullopt;
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
    }
  } else {
    const auto colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
    if (out.host.empty()) return std::nullopt;
  }
  if (!valid_port(port)) return std::nullopt;
  out.port = std::string(port);
  for (const char c : out.target) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return std::nullopt; // no request line splitting
  }
  return out;
}

bool plain_http_applies(std::string_view url, const std::function<const char*(const char*)>& getenv) {
  if (!parse_plain_url(url)) return false;
  for (const char* name : {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}) {
    const char* value = getenv(name);
    if (value != nullptr && *value != '\0') return false;
  }
  return true;
}

std::string base64(std::string_view bytes) {
  static constexpr char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16 |
                       static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += {digits[v >> 18], digits[(v >> 12) & 63], digits[(v >> 6) & 63], digits[v & 63]};
  }
  if (i + 1 == bytes.size()) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16;
    out += {digits[v >> 18], digits[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const unsigned v = static_cast<unsigned char>(bytes[i]) << 16 | static_cast<unsigned char>(bytes[i + 1])
                                                                        << 8;
    out += {digits[v >> 18], digits[(v >> 12) & 63], digits[(v >> 6) & 63], '='};
  }
  return out;
}

std::string plain_request_text(const HttpRequest& request, const PlainUrl& url, const HttpAuth& auth) {
  std::string text = fmt::format("{} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: air-run/" AIR_VERSION
                                 "\r\nAccept: application/json\r\n",
                                 request.method, url.target, url.authority);
  const bool has_body = request.method == "POST" || request.method == "PUT";
  if (has_body) {
    if (!request.content_type.empty()) text += "Content-Type: " + request.content_type + "\r\n";
    text += fmt::format("Content-Length: {}\r\n", request.body.size());
  }
  if (!auth.bearer_token.empty()) {
    text += "Authorization: Bearer " + auth.bearer_token + "\r\n";
  } else if (!auth.user.empty()) {
    text += "Authorization: Basic " + base64(auth.user + ":" + auth.password) + "\r\n";
  }
  text += "Connection: close\r\n\r\n";
  if (has_body) text += request.body;
  return text;
}

ResponseReader::State ResponseReader::fail(std::string why) {
  error_ = std::move(why);
  return State::bad;
}

std::optional<std::string> ResponseReader::take_line() {
  const auto end = buffer_.find('\n');
  if (end == std::string::npos) return std::nullopt;
  std::string line = buffer_.substr(0, end);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  buffer_.erase(0, end + 1);
  return line;
}

ResponseReader::State ResponseReader::feed(std::string_view bytes) {
  if (phase_ == Phase::finished) return State::done;
  if (!error_.empty()) return State::bad;
  buffer_.append(bytes);
  return parse();
}

ResponseReader::State ResponseReader::end_of_stream() {
  if (phase_ == Phase::finished) return State::done;
  if (!error_.empty()) return State::bad;
  if (phase_ == Phase::until_close) {
    phase_ = Phase::finished;
    return State::done;
  }
  return fail(phase_ == Phase::head ? "the server closed the connection without an answer"
                                    : "the server closed the connection in the middle of its answer");
}

ResponseReader::State ResponseReader::parse_head() {
  const auto blank =
      buffer_.find("\n\r\n") != std::string::npos ? buffer_.find("\n\r\n") : buffer_.find("\n\n");
  if (blank == std::string::npos) {
    if (buffer_.size() > k_max_head) return fail("the server's answer has more than 64 KiB of headers");
    return State::more;
  }
  const auto status_line = take_line();
  // "HTTP/1.1 200 OK": the version, a space, three digits.
  if (!status_line || status_line->rfind("HTTP/1.", 0) != 0 || status_line->size() < 12 ||
      (*status_line)[8] != ' ' || !all_digits(std::string_view(*status_line).substr(9, 3))) {
    return fail("the server's answer is not HTTP/1.x: " + strip_control_characters(status_line.value_or("")));
  }
  const long status = std::stol(status_line->substr(9, 3));
  if (status < 100)
    return fail("the server's answer has no valid status: " + strip_control_characters(*status_line));
  std::optional<std::size_t> length;
  bool chunked = false;
  while (auto line = take_line()) {
    if (line->empty()) break;
    if (auto te = header_value(*line, "transfer-encoding")) {
      chunked = lower(*te).find("chunked") != std::string::npos;
    } else if (auto cl = header_value(*line, "content-length")) {
      if (!all_digits(*cl) || cl->empty() || cl->size() > 18)
        return fail("a bad Content-Length: " + std::string(*cl));
      const auto value = static_cast<std::size_t>(std::stoull(std::string(*cl)));
      if (length && *length != value) return fail("two different Content-Length headers");
      length = value;
    }
  }
  if (status >= 100 && status < 200) return State::more; // interim (100 Continue): the real answer follows
  response_.status = status;
  if (status == 204 || status == 304) {
    phase_ = Phase::finished;
  } else if (chunked) {
    phase_ = Phase::chunk_size;
  } else if (length) {
    if (*length > max_body_) return fail(fmt::format("the server's answer is too large ({} bytes)", *length));
    remaining_ = *length;
    phase_ = Phase::length;
  } else {
    phase_ = Phase::until_close;
  }
  return State::more;
}

bool ResponseReader::take_body() {
  const std::size_t n = std::min(remaining_, buffer_.size());
  response_.body.append(buffer_, 0, n);
  buffer_.erase(0, n);
  remaining_ -= n;
  return remaining_ == 0;
}

ResponseReader::State ResponseReader::parse() {
  while (true) {
    switch (phase_) {
    case Phase::head: {
      const auto before = buffer_.size();
      if (const State s = parse_head(); s == State::bad) return s;
      if (phase_ == Phase::head && buffer_.size() == before) return State::more; // headers incomplete
      break;
    }
    case Phase::length:
      if (!take_body()) return State::more;
      phase_ = Phase::finished;
      break;
    case Phase::chunk_size: {
      auto line = take_line();
      if (!line) return State::more;
      const std::string size = std::string(trim(std::string_view(*line).substr(0, line->find(';'))));
      if (size.empty() || size.size() > 15 ||
          size.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        return fail("a bad chunk size: " + strip_control_characters(size));
      remaining_ = std::stoull(size, nullptr, 16);
      if (response_.body.size() + remaining_ > max_body_) return fail("the server's answer is too large");
      phase_ = remaining_ == 0 ? Phase::trailers : Phase::chunk_data;
      break;
    }
    case Phase::chunk_data:
      if (!take_body()) return State::more;
      phase_ = Phase::chunk_end;
      break;
    case Phase::chunk_end: {
      auto line = take_line();
      if (!line) return State::more;
      if (!line->empty()) return fail("a chunk longer than its size");
      phase_ = Phase::chunk_size;
      break;
    }
    case Phase::trailers: {
      auto line = take_line();
      if (!line) return State::more;
      if (line->empty()) phase_ = Phase::finished;
      break;
    }
    case Phase::until_close:
      if (response_.body.size() + buffer_.size() > max_body_) return fail("the server's answer is too large");
      response_.body += buffer_;
      buffer_.clear();
      return State::more;
    case Phase::finished:
      return State::done;
    }
  }
}

namespace {

/// One request's clock and its way out: a wait ends at the deadline, or when
/// abort_check says so.
class Exchange {
public:
  Exchange(std::chrono::milliseconds timeout, const std::function<bool()>& abort_check)
      : timeout_(timeout), deadline_(Clock::now() + timeout), abort_check_(abort_check) {}

  /// Waits until `fd` is ready for `events`.
  Status wait(int fd, short events) const {
    while (true) {
      if (abort_check_ && abort_check_()) return Error{ErrorKind::system, "interrupted"};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
      if (left.count() <= 0) return timed_out();
      const auto slice = abort_check_ ? std::min(left, k_abort_slice) : left;
      pollfd p{fd, events, 0};
      const int n = ::poll(&p, 1, static_cast<int>(slice.count()) + 1);
      if (n > 0) return ok_status();
      if (n < 0 && errno != EINTR)
        return Error{ErrorKind::system, fmt::format("poll: {}", std::strerror(errno))};
    }
  }

  Error timed_out() const {
    return Error{ErrorKind::system,
                 fmt::format("Operation timed out after {} milliseconds", timeout_.count())};
  }

private:
  std::chrono::milliseconds timeout_;
  Clock::time_point deadline_;
  const std::function<bool()>& abort_check_;
};

/// A connected, non-blocking TCP socket to `url`, Nagle off (a request goes
/// in one write, and the answer is waited for at once).
Expected<UniqueFd> connect_to(const PlainUrl& url, const Exchange& exchange) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &found); rc != 0) {
    return Error{ErrorKind::system,
                 fmt::format("Could not resolve host: {} ({})", url.host, ::gai_strerror(rc))};
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, ::freeaddrinfo);
  int last_errno = ECONNREFUSED;
  for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd) {
      last_errno = errno;
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_errno = errno;
        continue;
      }
      AIR_TRY(exchange.wait(fd.get(), POLLOUT));
      int error = 0;
      socklen_t size = sizeof error;
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) error = errno;
      if (error != 0) {
        last_errno = error;
        continue;
      }
    }
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  return Error{ErrorKind::system,
               fmt::format("Failed to connect to {} port {}: Couldn't connect to server ({})", url.host,
                           url.port, std::strerror(last_errno))};
}

} // namespace

Expected<HttpResponse> send_plain_http(const HttpRequest& request, const HttpAuth& auth,
                                       const std::function<bool()>& abort_check) {
  const auto url = parse_plain_url(request.url);
  if (!url)
    return Error{ErrorKind::usage, "not a plain http:// URL: " + strip_control_characters(request.url)};
  const Exchange exchange(request.timeout, abort_check);
  auto fd = connect_to(*url, exchange);
  if (!fd) return fd.error();

  const std::string text = plain_request_text(request, *url, auth);
  std::size_t sent = 0;
  bool send_failed = false; // a server may answer (413, 401) and close before reading it all
  while (sent < text.size() && !send_failed) {
    const ssize_t n = ::send(fd->get(), text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      AIR_TRY(exchange.wait(fd->get(), POLLOUT));
    } else if (n < 0 && errno != EINTR) {
      send_failed = true;
    }
  }

  ResponseReader reader;
  char chunk[16 * 1024];
  while (true) {
    const ssize_t n = ::recv(fd->get(), chunk, sizeof chunk, 0);
    ResponseReader::State state = ResponseReader::State::more;
    if (n > 0) {
      state = reader.feed(std::string_view(chunk, static_cast<std::size_t>(n)));
    } else if (n == 0) {
      state = reader.end_of_stream();
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      AIR_TRY(exchange.wait(fd->get(), POLLIN));
      continue;
    } else if (errno == EINTR) {
      continue;
    } else {
      return Error{ErrorKind::system, fmt::format("Recv failure: {}", std::strerror(errno))};
    }
    if (state == ResponseReader::State::done) return reader.response();
    if (state == ResponseReader::State::bad) {
      if (send_failed) return Error{ErrorKind::system, "Send failure: the server closed the connection"};
      return Error{ErrorKind::system, reader.error()};
    }
  }
}

} // namespace air::mlflow
