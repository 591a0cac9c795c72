#pragma once

#include "core/base/error.hpp"
#include "core/mlflow/http.hpp"

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace air::mlflow {

/// Where a plain-HTTP request goes: `http://HOST[:PORT][/PATH][?QUERY]`.
struct PlainUrl {
  std::string host;      ///< a name or an address; an IPv6 address without its brackets
  std::string port;      ///< "80" when the URL names none
  std::string target;    ///< the path and query as sent on the request line, "/" at least
  std::string authority; ///< HOST[:PORT] as the URL wrote it: the Host header
};

/// Parses an `http://` URL. nullopt for any other scheme, for credentials in
/// the URL (they travel in HttpAuth, never in a URL), for a fragment, and for
/// an authority that is not a host with an optional numeric port. Pure.
std::optional<PlainUrl> parse_plain_url(std::string_view url);

/// Whether air-run's own client sends to `url`: plain `http://` with no proxy
/// variable set (`http_proxy`, `HTTP_PROXY`, `all_proxy`, `ALL_PROXY`).
/// Everything else (HTTPS, a proxy and its `no_proxy` rules) goes to libcurl,
/// which loads 30 libraries first. `getenv` reads one variable (nullptr when
/// unset). Pure but for `getenv`.
bool plain_http_applies(std::string_view url, const std::function<const char*(const char*)>& getenv);

/// The bytes of one HTTP/1.1 request: request line, Host, User-Agent,
/// Accept, Content-Type and Content-Length for a body, the credentials as an
/// Authorization header, and `Connection: close` (one request per
/// connection, so a request is never sent twice on a connection that a
/// server closed meanwhile). Pure.
std::string plain_request_text(const HttpRequest& request, const PlainUrl& url, const HttpAuth& auth);

/// Standard base64 (RFC 4648, with padding), for basic authentication. Pure.
std::string base64(std::string_view bytes);

/// Reads one HTTP/1.x answer from its bytes as they arrive: the status line,
/// the headers, and a body delimited by Content-Length, by chunked transfer
/// coding, or by the end of the connection. Interim answers (1xx) are
/// skipped. Answers larger than `max_body` are refused, so a broken server
/// cannot make air-run hold gigabytes.
class ResponseReader {
public:
  enum class State { more, done, bad };

  explicit ResponseReader(std::size_t max_body = 64u << 20) : max_body_(max_body) {}

  /// Takes the next bytes; `done` once the answer is complete (later bytes
  /// are ignored), `bad` with error() for a malformed one.
  State feed(std::string_view bytes);
  /// The server closed the connection: `done` when that ends the answer.
  State end_of_stream();

  const HttpResponse& response() const { return response_; }
  const std::string& error() const { return error_; }

private:
  enum class Phase { head, length, chunk_size, chunk_data, chunk_end, trailers, until_close, finished };
  State parse();
  State parse_head();
  State fail(std::string why);
  /// One line (without its CRLF or LF) off the front of the buffer; nullopt
  /// when no complete line has arrived yet.
  std::optional<std::string> take_line();
  /// Moves up to `remaining_` buffered bytes into the body; true once all
  /// of them have come.
  bool take_body();

  std::size_t max_body_;
  std::string buffer_;
  Phase phase_ = Phase::head;
  std::size_t remaining_ = 0;
  HttpResponse response_;
  std::string error_;
};

/// Sends one request on a new TCP connection and reads the answer, within
/// request.timeout from the first step to the last, asking `abort_check`
/// (when set) every 20 ms. Errors (system kind) read like curl's: "Failed to
/// connect to 127.0.0.1 port 9: Couldn't connect to server (Connection
/// refused)", "Operation timed out after 10000 milliseconds", "interrupted".
/// `request.url` must pass parse_plain_url.
Expected<HttpResponse> send_plain_http(const HttpRequest& request, const HttpAuth& auth,
                                       const std::function<bool()>& abort_check);

} // namespace air::mlflow
