#include "core/base/json_depth.hpp"

namespace air {

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  std::size_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
    case '"':
      in_string = true;
      break;
    case '[':
    case '{':
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return limit + 1;
      break;
    case ']':
    case '}':
      if (depth > 0) --depth;
      break;
    default:
      break;
    }
  }
  return deepest;
}

} // namespace air
