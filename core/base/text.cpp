#include "core/base/text.hpp"

#include <cstdint>
#include <cstring>

namespace air {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool all_digits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text)
    if (!is_digit(c)) return false;
  return true;
}

std::string_view trim(std::string_view text) {
  const auto blank = [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
  };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string single_quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

Expected<std::vector<std::string>> split_command_line(std::string_view text, std::string_view what) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote == '\'') {
      if (c == '\'')
        quote = 0;
      else
        word += c;
    } else if (quote == '"') {
      if (c == '"')
        quote = 0;
      else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\'))
        word += text[++i];
      else
        word += c;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0) return usage_error(std::string(what) + ": unterminated quote in " + single_quoted(text));
  if (in_word) words.push_back(std::move(word));
  return words;
}

namespace {

/// Whether the 8 bytes at `p` are all printable ASCII (0x20-0x7e), tested
/// together: a byte below 0x20 borrows into its top bit when 0x20 is taken
/// away, one at 0x7f or above has (or gets, when 1 is added) its top bit set.
bool printable_ascii8(const char* p) {
  std::uint64_t x;
  std::memcpy(&x, p, sizeof x);
  constexpr std::uint64_t ones = 0x0101010101010101ULL;
  constexpr std::uint64_t tops = 0x8080808080808080ULL;
  const std::uint64_t below_space = (x - ones * 0x20) & ~x & tops;
  const std::uint64_t del_or_high = (x | (x + ones)) & tops;
  return (below_space | del_or_high) == 0;
}

} // namespace

std::string strip_control_characters(std::string_view text, LineBreaks line_breaks) {
  // The bytes between two replacements go out in one append: the report's
  // tail passes each rank's last lines through here, nearly all of them clean.
  std::string out;
  out.reserve(text.size());
  std::size_t kept = 0; // where the bytes not yet appended begin
  const auto replace = [&](std::size_t at, std::size_t length) {
    out.append(text.substr(kept, at - kept));
    out += '?';
    kept = at + length;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    // Eight printable ASCII bytes (0x20-0x7e) at once: nothing to replace among them.
    while (i + 8 <= text.size() && printable_ascii8(text.data() + i)) i += 8;
    if (i >= text.size()) break;
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c == '\n' || c == '\t') && line_breaks == LineBreaks::keep) continue;
    if (c < 0x20 || c == 0x7f) {
      replace(i, 1);
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      replace(i, 2); // U+0080..U+009F: C1 controls, CSI among them
      ++i;
    }
  }
  out.append(text.substr(kept));
  return out;
}

} // namespace air
