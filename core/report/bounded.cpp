#include "core/report/bounded.hpp"

#include <fmt/format.h>

namespace air {
namespace {

bool continuation(std::string_view text, std::size_t at) {
  return at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80;
}

/// `at` moved back to the start of the UTF-8 character it is in.
std::size_t character_start(std::string_view text, std::size_t at) {
  while (at > 0 && continuation(text, at)) --at;
  return at;
}

/// `at` moved on to the start of the next UTF-8 character, unless it is at one.
std::size_t next_character(std::string_view text, std::size_t at) {
  while (continuation(text, at)) ++at;
  return at;
}

} // namespace

std::string bounded_text(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  // The note's own length, with the largest count it can hold.
  const std::string widest = fmt::format("\n[... {} bytes cut ...]\n", text.size());
  const std::size_t room = max_bytes > widest.size() ? max_bytes - widest.size() : 0;
  const std::size_t head = character_start(text, room / 2);
  const std::size_t tail_from = next_character(text, text.size() - (room - room / 2));
  std::string out(text.substr(0, head));
  out += fmt::format("\n[... {} bytes cut ...]\n", tail_from - head);
  out.append(text.substr(tail_from));
  return out;
}

std::string bounded_head(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  const std::size_t keep = character_start(text, max_bytes > 3 ? max_bytes - 3 : 0);
  return std::string(text.substr(0, keep)) + "...";
}

} // namespace air
