#pragma once

#include <cstddef>
#include <string_view>

namespace air {

/// The deepest nesting of arrays and objects air-run accepts in a JSON file a
/// rank or peer wrote. Real results nest a few levels; parsing, copying and
/// writing a value nested tens of thousands deep recurses once per level and
/// overflows the stack, so such a file is refused before it is parsed.
inline constexpr std::size_t k_max_json_depth = 128;

/// How deeply `text` nests '[' and '{' outside of JSON strings, stopping early
/// once the depth passes `limit` (the answer is then `limit + 1`). A scan of
/// the bytes, not a parse: malformed text still gets an answer, and the
/// parser reports its own errors afterwards.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit = k_max_json_depth);

} // namespace air
