// air-run's own HTTP/1.1 client (core/mlflow/plain_http.hpp): which URLs it
// takes, the bytes it sends, how it reads every way an answer can be
// delimited, and real exchanges with a loopback server on a thread.
#include "core/mlflow/plain_http.hpp"
#include "tests/unit/catch.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>

using air::mlflow::HttpAuth;
using air::mlflow::HttpRequest;
using air::mlflow::ResponseReader;
using State = air::mlflow::ResponseReader::State;

TEST_CASE("parse_plain_url takes http URLs and nothing else", "[plain_http]") {
  auto url = air::mlflow::parse_plain_url("http://127.0.0.1:5000/api/2.0/mlflow/runs/get?run_id=abc");
  REQUIRE(url);
  CHECK(url->host == "127.0.0.1");
  CHECK(url->port == "5000");
  CHECK(url->target == "/api/2.0/mlflow/runs/get?run_id=abc");
  CHECK(url->authority == "127.0.0.1:5000");

  url = air::mlflow::parse_plain_url("HTTP://tracking.example");
  REQUIRE(url);
  CHECK(url->port == "80");
  CHECK(url->target == "/");
  url = air::mlflow::parse_plain_url("http://[::1]:8080/x");
  REQUIRE(url);
  CHECK(url->host == "::1");
  CHECK(url->authority == "[::1]:8080");
  url = air::mlflow::parse_plain_url("http://h?x=1");
  REQUIRE(url);
  CHECK(url->target == "/?x=1");

  for (const char* other : {"https://h/x", "ftp://h", "http://", "http://user:pw@h/", "http://h:99999/",
                            "http://h:/", "http://:80/", "http://h:x/", "http://h/a b", "http://h/#frag",
                            "http://[::1/", "http://h/a\r\nX: y"}) {
    INFO(other);
    CHECK_FALSE(air::mlflow::parse_plain_url(other));
  }
}

TEST_CASE("a proxy variable sends plain http to libcurl", "[plain_http]") {
  std::map<std::string, std::string> env;
  const auto lookup = [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK(air::mlflow::plain_http_applies("http://127.0.0.1:5000", lookup));
  CHECK_FALSE(air::mlflow::plain_http_applies("https://127.0.0.1:5000", lookup));
  env["https_proxy"] = "http://proxy:3128"; // not for plain http
  CHECK(air::mlflow::plain_http_applies("http://127.0.0.1:5000", lookup));
  env["http_proxy"] = "";
  CHECK(air::mlflow::plain_http_applies("http://127.0.0.1:5000", lookup));
  for (const char* name : {"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}) {
    env.clear();
    env[name] = "http://proxy:3128";
    INFO(name);
    CHECK_FALSE(air::mlflow::plain_http_applies("http://127.0.0.1:5000", lookup));
  }
}

TEST_CASE("base64 follows RFC 4648's test vectors", "[plain_http]") {
  const std::map<std::string, std::string> vectors = {{"", ""},
                                                      {"f", "Zg=="},
                                                      {"fo", "Zm8="},
                                                      {"foo", "Zm9v"},
                                                      {"foob", "Zm9vYg=="},
                                                      {"fooba", "Zm9vYmE="},
                                                      {"foobar", "Zm9vYmFy"},
                                                      {"\xff\xfe", "//4="}};
  for (const auto& [in, out] : vectors) CHECK(air::mlflow::base64(in) == out);
}

TEST_CASE("plain_request_text sends the body's length and the credentials as a header", "[plain_http]") {
  const auto url = air::mlflow::parse_plain_url("http://h:5000/api/2.0/mlflow/runs/create");
  REQUIRE(url);
  HttpRequest request;
  request.method = "POST";
  request.url = "http://h:5000/api/2.0/mlflow/runs/create";
  request.body = R"({"experiment_id":"0"})";
  HttpAuth auth;
  auth.user = "Aladdin";
  auth.password = "open sesame";
  const std::string text = air::mlflow::plain_request_text(request, *url, auth);
  CHECK(text.rfind("POST /api/2.0/mlflow/runs/create HTTP/1.1\r\nHost: h:5000\r\n", 0) == 0);
  CHECK(text.find("Content-Type: application/json\r\n") != std::string::npos);
  CHECK(text.find("Content-Length: 21\r\n") != std::string::npos);
  CHECK(text.find("Authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\r\n") !=
        std::string::npos); // RFC 7617's
  CHECK(text.find("Connection: close\r\n\r\n{\"experiment_id\":\"0\"}") != std::string::npos);
  CHECK(text.find("open sesame") == std::string::npos);

  request.method = "GET";
  request.body.clear();
  auth = HttpAuth{};
  auth.bearer_token = "dapi123";
  const std::string get = air::mlflow::plain_request_text(request, *url, auth);
  CHECK(get.find("Authorization: Bearer dapi123\r\n") != std::string::npos);
  CHECK(get.find("Content-Length") == std::string::npos);
  CHECK(get.find("Content-Type") == std::string::npos);
}

namespace {

/// Feeds `text` one byte at a time: every split point of an answer is tried.
State feed_bytewise(ResponseReader& reader, const std::string& text) {
  State state = State::more;
  for (const char c : text) {
    state = reader.feed(std::string_view(&c, 1));
    if (state != State::more) break;
  }
  return state;
}

} // namespace

TEST_CASE("ResponseReader reads a body by its length, its chunks, or the end of the connection",
          "[plain_http]") {
  SECTION("Content-Length") {
    ResponseReader reader;
    CHECK(
        feed_bytewise(reader, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nX: y\r\n\r\n{\"a\":1}trailing junk") ==
        State::done);
    CHECK(reader.response().status == 200);
    CHECK(reader.response().body == "{\"a\":1}");
  }
  SECTION("chunked, with an extension and a trailer") {
    ResponseReader reader;
    CHECK(feed_bytewise(reader,
                        "HTTP/1.1 404 Not Found\r\ntransfer-encoding: Chunked\r\n\r\n"
                        "4;ext=1\r\nabcd\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n") == State::done);
    CHECK(reader.response().status == 404);
    CHECK(reader.response().body == "abcd0123456789");
  }
  SECTION("until the server closes") {
    ResponseReader reader;
    CHECK(reader.feed("HTTP/1.0 500 Internal Server Error\r\n\r\npart one, ") == State::more);
    CHECK(reader.feed("part two") == State::more);
    CHECK(reader.end_of_stream() == State::done);
    CHECK(reader.response().status == 500);
    CHECK(reader.response().body == "part one, part two");
  }
  SECTION("an interim 100 Continue, then the answer; bare LF line ends") {
    ResponseReader reader;
    CHECK(feed_bytewise(reader, "HTTP/1.1 100 Continue\n\nHTTP/1.1 201 Created\nContent-Length: 2\n\nok") ==
          State::done);
    CHECK(reader.response().status == 201);
    CHECK(reader.response().body == "ok");
  }
  SECTION("204 has no body") {
    ResponseReader reader;
    CHECK(reader.feed("HTTP/1.1 204 No Content\r\n\r\n") == State::done);
    CHECK(reader.response().body.empty());
  }
}

TEST_CASE("ResponseReader refuses what is not a whole HTTP answer", "[plain_http]") {
  const auto bad = [](const std::string& text) {
    ResponseReader reader(100);
    State state = reader.feed(text);
    if (state == State::more) state = reader.end_of_stream();
    INFO(text);
    CHECK(state == State::bad);
    return reader.error();
  };
  CHECK(bad("") == "the server closed the connection without an answer");
  CHECK(bad("SSH-2.0-OpenSSH_9.2\r\n\r\n").find("not HTTP/1.x") != std::string::npos);
  CHECK(bad("HTTP/1.1 042 Odd\r\n\r\n").find("no valid status") != std::string::npos);
  CHECK(bad("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort") ==
        "the server closed the connection in the middle of its answer");
  CHECK(bad("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n").find("Content-Length") != std::string::npos);
  CHECK(bad("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").find("two different") !=
        std::string::npos);
  CHECK(bad("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n").find("too large") != std::string::npos);
  CHECK(bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").find("chunk size") !=
        std::string::npos);
  CHECK(
      bad("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n").find("longer than its size") !=
      std::string::npos);
  CHECK(bad("HTTP/1.1 200 OK\r\n\r\n" + std::string(101, 'x')).find("too large") != std::string::npos);
}

namespace {

/// A one-connection HTTP server on 127.0.0.1 and a free port: reads one
/// request (headers and a Content-Length body), then answers `answer`
/// (nothing when empty, holding the connection open until stopped).
class OneShotServer {
public:
  explicit OneShotServer(std::string answer) : answer_(std::move(answer)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener_, 1) == 0);
    socklen_t size = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &size);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~OneShotServer() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  /// What the client sent; complete once the client has its answer.
  std::string received() const { return received_; }

private:
  void serve() {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    char buf[4096];
    while (true) {
      const auto head_end = received_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const auto cl = received_.find("Content-Length: ");
        const std::size_t body = cl == std::string::npos ? 0 : std::stoul(received_.substr(cl + 16));
        if (received_.size() >= head_end + 4 + body) break;
      }
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      received_.append(buf, static_cast<std::size_t>(n));
    }
    if (!answer_.empty()) {
      // In two writes, split inside the headers: the client must join them.
      const std::size_t half = answer_.size() / 2;
      ::send(fd, answer_.data(), half, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ::send(fd, answer_.data() + half, answer_.size() - half, MSG_NOSIGNAL);
    } else {
      while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ::close(fd);
  }

  std::string answer_;
  int listener_ = -1;
  int port_ = 0;
  std::string received_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

HttpRequest post(const std::string& url, const std::string& body) {
  HttpRequest request;
  request.method = "POST";
  request.url = url;
  request.body = body;
  request.timeout = std::chrono::milliseconds(5000);
  return request;
}

} // namespace

TEST_CASE("send_plain_http exchanges one request with a loopback server", "[plain_http]") {
  const std::string body(100'000, 'b'); // larger than a socket buffer's first write
  std::string answer;
  {
    OneShotServer server("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
                         "{\"run\":{}}\n");
    auto response = air::mlflow::send_plain_http(post(server.url("/api/x"), body), HttpAuth{}, nullptr);
    REQUIRE(response);
    CHECK(response->status == 200);
    CHECK(response->body == "{\"run\":{}}\n");
    answer = server.received();
  }
  CHECK(answer.rfind("POST /api/x HTTP/1.1\r\n", 0) == 0);
  CHECK(answer.size() > body.size());
  CHECK(answer.substr(answer.size() - body.size()) == body);
}

TEST_CASE("send_plain_http names a refused connection, a timeout and an interrupt", "[plain_http]") {
  SECTION("refused") {
    int port = 0;
    {
      OneShotServer closed("x"); // a port that was free a moment ago
      port = std::stoi(closed.url("").substr(17));
      // The server's one accept is taken by a connection that closes at once.
      air::mlflow::send_plain_http(post(closed.url("/"), ""), HttpAuth{}, nullptr);
    }
    auto response = air::mlflow::send_plain_http(post("http://127.0.0.1:" + std::to_string(port) + "/", ""),
                                                 HttpAuth{}, nullptr);
    REQUIRE_FALSE(response);
    CHECK(response.error().message.find("Failed to connect to 127.0.0.1 port " + std::to_string(port) +
                                        ": Couldn't connect to server") != std::string::npos);
  }
  SECTION("timeout") {
    OneShotServer silent("");
    HttpRequest request = post(silent.url("/"), "{}");
    request.timeout = std::chrono::milliseconds(200);
    const auto start = std::chrono::steady_clock::now();
    auto response = air::mlflow::send_plain_http(request, HttpAuth{}, nullptr);
    const auto took = std::chrono::steady_clock::now() - start;
    REQUIRE_FALSE(response);
    CHECK(response.error().message == "Operation timed out after 200 milliseconds");
    CHECK(took >= std::chrono::milliseconds(200));
    CHECK(took < std::chrono::milliseconds(3000));
  }
  SECTION("interrupted") {
    OneShotServer silent("");
    std::atomic<int> asked{0};
    auto response = air::mlflow::send_plain_http(post(silent.url("/"), "{}"), HttpAuth{},
                                                 [&asked] { return ++asked > 3; });
    REQUIRE_FALSE(response);
    CHECK(response.error().message == "interrupted");
  }
}
