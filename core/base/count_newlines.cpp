#include "core/base/count_newlines.hpp"

#include <cstring>

namespace air {

std::size_t count_newlines(std::string_view text) {
  std::size_t n = 0;
  const char* at = text.data();
  const char* const end = at + text.size();
  while (at < end) {
    const void* newline = std::memchr(at, '\n', static_cast<std::size_t>(end - at));
    if (newline == nullptr) break;
    ++n;
    at = static_cast<const char*>(newline) + 1;
  }
  return n;
}

const char* start_of_last_lines(std::string_view text, std::size_t n) {
  // memrchr's pointer must not be null, even for no bytes (an empty view's
  // data() may be: UBSan stops the run there).
  if (text.empty()) return text.data();
  const void* last = ::memrchr(text.data(), '\n', text.size());
  if (last == nullptr) return text.data();
  std::size_t end = static_cast<std::size_t>(static_cast<const char*>(last) - text.data());
  for (std::size_t seen = 0; seen < n; ++seen) {
    const void* newline = ::memrchr(text.data(), '\n', end);
    if (newline == nullptr) return text.data();
    end = static_cast<std::size_t>(static_cast<const char*>(newline) - text.data());
  }
  return text.data() + end + 1;
}

} // namespace air
