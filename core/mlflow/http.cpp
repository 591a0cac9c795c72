// The HTTP client behind the REST store: air-run's own for plain HTTP, else
// libcurl's easy interface, loaded with dlopen at the first use. air-run
// itself must run where libcurl is not installed (slim training images, the
// portable binary): only tracking over HTTPS or a proxy needs it, and says so
// when it is missing.
#include "core/mlflow/http.hpp"

#include "core/mlflow/plain_http.hpp"

// Plain function declarations (no type-checking macros): only their types are
// used here, through decltype, so nothing links against libcurl.
#define CURL_DISABLE_TYPECHECK 1
// CURLOPT_PROTOCOLS is deprecated in new headers but the one old libcurls know.
#define CURL_DISABLE_DEPRECATION 1
#include <curl/curl.h>
#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>

namespace air::mlflow {

namespace {

/// libcurl's entry points air-run calls, from the library found at run time.
struct CurlApi {
  decltype(&::curl_global_init) global_init = nullptr;
  decltype(&::curl_easy_init) easy_init = nullptr;
  decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&::curl_easy_reset) easy_reset = nullptr;
  decltype(&::curl_easy_setopt) easy_setopt = nullptr;
  decltype(&::curl_easy_perform) easy_perform = nullptr;
  decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&::curl_easy_strerror) easy_strerror = nullptr;
  decltype(&::curl_slist_append) slist_append = nullptr;
  decltype(&::curl_slist_free_all) slist_free_all = nullptr;
  std::string error; ///< why it could not be loaded; "" when loaded
};

/// Loads libcurl once (the OpenSSL build, else the GnuTLS one Debian also
/// ships) and initialises it. The handle is never closed: curl keeps state.
const CurlApi& curl_api() {
  static const CurlApi api = [] {
    CurlApi out;
    void* lib = nullptr;
    for (const char* name : {"libcurl.so.4", "libcurl-gnutls.so.4"}) {
      if ((lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    }
    if (lib == nullptr) {
      out.error = "MLflow tracking needs libcurl (libcurl.so.4), which is not installed "
                  "(Debian and Ubuntu: apt-get install libcurl4)";
      return out;
    }
    bool complete = true;
    const auto load = [&](auto& fn, const char* symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, symbol));
      complete &= fn != nullptr;
    };
    load(out.global_init, "curl_global_init");
    load(out.easy_init, "curl_easy_init");
    load(out.easy_cleanup, "curl_easy_cleanup");
    load(out.easy_reset, "curl_easy_reset");
    load(out.easy_setopt, "curl_easy_setopt");
    load(out.easy_perform, "curl_easy_perform");
    load(out.easy_getinfo, "curl_easy_getinfo");
    load(out.easy_strerror, "curl_easy_strerror");
    load(out.slist_append, "curl_slist_append");
    load(out.slist_free_all, "curl_slist_free_all");
    if (!complete) {
      out.error = "MLflow tracking: the installed libcurl lacks functions air-run needs";
      return out;
    }
    out.global_init(CURL_GLOBAL_DEFAULT);
    return out;
  }();
  return api;
}

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
  void add(const std::string& line) { list = curl_api().slist_append(list, line.c_str()); }
  ~Headers() {
    if (list != nullptr) curl_api().slist_free_all(list);
  }
};

} // namespace

namespace {

bool plain(std::string_view url) {
  return plain_http_applies(url, [](const char* name) { return std::getenv(name); });
}

} // namespace

Status HttpClient::available(std::string_view url) {
  if (plain(url)) return ok_status();
  const CurlApi& api = curl_api();
  if (!api.error.empty()) return Error{ErrorKind::system, api.error};
  return ok_status();
}

HttpClient::HttpClient(HttpAuth auth) : auth_(std::move(auth)) {}

HttpClient::~HttpClient() {
  if (curl_ != nullptr) curl_api().easy_cleanup(static_cast<CURL*>(curl_));
}

Expected<HttpResponse> HttpClient::send(const HttpRequest& request) {
  if (plain(request.url)) return send_plain_http(request, auth_, abort_check_);
  const CurlApi& api = curl_api();
  if (!api.error.empty()) return Error{ErrorKind::system, api.error};
  if (curl_ == nullptr) curl_ = api.easy_init();
  auto* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return Error{ErrorKind::system, "curl_easy_init failed"};
  const auto curl_easy_setopt = api.easy_setopt; // the loaded one, under the name curl's docs use
  api.easy_reset(curl); // keeps the connection cache, clears the previous request's options
  HttpResponse response;
  char error_text[CURL_ERROR_SIZE] = {};
  Headers headers;
  if (!request.content_type.empty() && request.method != "GET")
    headers.add("Content-Type: " + request.content_type);
  headers.add("Accept: application/json");
  headers.add("User-Agent: air-run/" AIR_VERSION);
  if (!auth_.bearer_token.empty()) headers.add("Authorization: Bearer " + auth_.bearer_token);

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  if (request.fresh_connection) curl_easy_setopt(curl, CURLOPT_FRESH_CONNECT, 1L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  // Only HTTP(S), whatever a redirect says. The string form came with curl
  // 7.85; the older bit mask is what Debian 11's 7.74 understands.
#if LIBCURL_VERSION_NUM >= 0x075500
  if (curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK)
#endif
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
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

  const CURLcode code = api.easy_perform(curl);
  if (code == CURLE_ABORTED_BY_CALLBACK) return Error{ErrorKind::system, "interrupted"};
  if (code != CURLE_OK) {
    std::string why = error_text[0] != '\0' ? error_text : api.easy_strerror(code);
    return Error{ErrorKind::system, why};
  }
  api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

} // namespace air::mlflow
