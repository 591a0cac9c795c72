#pragma once

#include "core/base/error.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace air::mlflow {

/// One HTTP request as the REST calls need it.
struct HttpRequest {
  std::string method; ///< "GET", "POST", "PUT"
  std::string url;    ///< without credentials
  std::string body;   ///< sent for POST and PUT
  std::string content_type = "application/json";
  std::chrono::milliseconds timeout{10'000}; ///< the whole exchange, connecting included
  /// On a connection of its own. libcurl sends a request again by itself when
  /// a reused connection closes without an answer; a request that must not
  /// be repeated blindly (runs/create) is safe from that only on a new one.
  bool fresh_connection = false;
};

/// An HTTP answer of any status.
struct HttpResponse {
  long status = 0;
  std::string body;
};

/// Credentials sent with every request, never logged.
struct HttpAuth {
  std::string bearer_token;   ///< "Authorization: Bearer ..." when set
  std::string user, password; ///< basic authentication when `user` is set
  bool insecure_tls = false;  ///< skip certificate checks (MLFLOW_TRACKING_INSECURE_TLS)
  std::string ca_file;        ///< extra CA bundle (MLFLOW_TRACKING_SERVER_CERT_PATH)
};

/// A small blocking HTTP(S) client. Plain `http://` without a proxy goes
/// through air-run's own client (plain_http.hpp: one connection per request,
/// nothing to load); HTTPS and proxied requests through libcurl, loaded at
/// their first use (keep-alive between calls of one client;
/// http_proxy/https_proxy/no_proxy honoured as curl does).
/// Transport failures (no connection, TLS, timeout) are errors; any HTTP
/// status, 5xx included, is a response. Not thread-safe; no signals used
/// (CURLOPT_NOSIGNAL), so it is safe in air-run's single-threaded process.
class HttpClient {
public:
  /// Whether requests to `url` can be sent: always for plain HTTP, else
  /// whether libcurl could be loaded (so that air-run runs without it). The
  /// error says what to install.
  static Status available(std::string_view url);

  explicit HttpClient(HttpAuth auth);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// Sends one request. Errors (system kind) carry curl's reason
  /// ("Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to
  /// server"), never a header; "interrupted" when the abort check fired.
  Expected<HttpResponse> send(const HttpRequest& request);

  /// Called during transfers; returning true aborts the one in progress.
  void set_abort_check(std::function<bool()> check) { abort_check_ = std::move(check); }

private:
  HttpAuth auth_;
  void* curl_ = nullptr; ///< CURL*, made at the first libcurl request; opaque, so only http.cpp sees curl.h
  std::function<bool()> abort_check_;
};

} // namespace air::mlflow
