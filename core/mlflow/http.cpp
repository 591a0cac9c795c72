// The HTTP client behind the REST store: libcurl's easy interface.
#include "core/mlflow/http.hpp"

#include <curl/curl.h>

#include <mutex>

namespace air::mlflow {

namespace {

std::size_t append_body(char* data, std::size_t size, std::size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

int progress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* check = static_cast<const std::function<bool()>*>(self);
  return (*check && (*check)()) ? 1 : 0;
}

/// curl_slist freed on scope exit.
struct Headers {
  curl_slist* list = nullptr;
  void add(const std::string& line) { list = curl_slist_append(list, line.c_str()); }
  ~Headers() { curl_slist_free_all(list); }
};

} // namespace

HttpClient::HttpClient(HttpAuth auth) : auth_(std::move(auth)) {
  static std::once_flag global_init;
  std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
}

HttpClient::~HttpClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Expected<HttpResponse> HttpClient::send(const HttpRequest& request) {
  auto* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return Error{ErrorKind::system, "curl_easy_init failed"};
  curl_easy_reset(curl); // keeps the connection cache, clears the previous request's options
  HttpResponse response;
  char error_text[CURL_ERROR_SIZE] = {};
  Headers headers;
  if (!request.content_type.empty() && request.method != "GET")
    headers.add("Content-Type: " + request.content_type);
  headers.add("Accept: application/json");
  headers.add("User-Agent: air-run/" AIR_VERSION);
  if (!auth_.bearer_token.empty()) headers.add("Authorization: Bearer " + auth_.bearer_token);

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &abort_check_);
  if (!auth_.user.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, auth_.user.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, auth_.password.c_str());
  }
  if (auth_.insecure_tls) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!auth_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, auth_.ca_file.c_str());
  if (request.method == "POST" || request.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  }

  const CURLcode code = curl_easy_perform(curl);
  if (code == CURLE_ABORTED_BY_CALLBACK) return Error{ErrorKind::system, "interrupted"};
  if (code != CURLE_OK) {
    std::string why = error_text[0] != '\0' ? error_text : curl_easy_strerror(code);
    return Error{ErrorKind::system, why};
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

} // namespace air::mlflow
