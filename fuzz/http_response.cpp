// Fuzz target: the bytes a tracking server (or anything listening on its
// port) sends back, read by air-run's own HTTP client. The answer read in one
// piece and the same bytes read in two pieces, split where the first byte
// says, give the same verdict, status and body, and no body exceeds the limit.
#include "core/mlflow/plain_http.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

using air::mlflow::ResponseReader;

constexpr std::size_t k_limit = 4096;

ResponseReader::State read_all(ResponseReader& reader, std::string_view first, std::string_view second) {
  auto state = reader.feed(first);
  if (state == ResponseReader::State::more) state = reader.feed(second);
  if (state == ResponseReader::State::more) state = reader.end_of_stream();
  return state;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1); // NOLINT
  const std::size_t split = data[0] % (bytes.size() + 1);
  ResponseReader whole(k_limit), pieces(k_limit);
  const auto a = read_all(whole, bytes, {});
  const auto b = read_all(pieces, bytes.substr(0, split), bytes.substr(split));
  if (a == ResponseReader::State::more || a != b) std::abort();
  if (a == ResponseReader::State::done) {
    if (whole.response().status != pieces.response().status ||
        whole.response().body != pieces.response().body)
      std::abort();
    if (whole.response().body.size() > k_limit || whole.response().status < 200 ||
        whole.response().status > 999)
      std::abort();
  } else if (whole.error().empty()) {
    std::abort();
  }
  return 0;
}
