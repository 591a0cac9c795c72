#include "core/run/terminal_line.hpp"

#include <algorithm>

namespace air {

namespace {

constexpr char k_esc = '\x1b';

/// The length of the escape sequence at `text[i]` (an ESC), and whether it is colour (SGR).
std::size_t escape_length(std::string_view text, std::size_t i, bool& is_color) {
  is_color = false;
  if (i + 1 >= text.size()) return text.size() - i;
  const char kind = text[i + 1];
  if (kind == '[') { // CSI: parameters, then a final byte 0x40-0x7E
    std::size_t j = i + 2;
    while (j < text.size() && (text[j] < 0x40 || text[j] > 0x7e)) ++j;
    if (j >= text.size()) return text.size() - i;
    is_color = text[j] == 'm';
    return j + 1 - i;
  }
  if (kind == ']') { // OSC (titles, hyperlinks): ends with BEL or ESC '\'
    for (std::size_t j = i + 2; j < text.size(); ++j) {
      if (text[j] == '\a') return j + 1 - i;
      if (text[j] == k_esc && j + 1 < text.size() && text[j + 1] == '\\') return j + 2 - i;
    }
    return text.size() - i;
  }
  return 2; // ESC 7, ESC 8, ESC M...
}

} // namespace

std::string visible_line(std::string_view raw) {
  // The last segment after a '\r' that has any text.
  std::string_view last = raw;
  std::size_t end = raw.size();
  while (end > 0) {
    const std::size_t cr = raw.rfind('\r', end - 1);
    const std::size_t begin = cr == std::string_view::npos ? 0 : cr + 1;
    if (begin < end) {
      last = raw.substr(begin, end - begin);
      break;
    }
    if (cr == std::string_view::npos || cr == 0) {
      last = {};
      break;
    }
    end = cr;
  }
  std::string out;
  out.reserve(last.size());
  for (std::size_t i = 0; i < last.size();) {
    if (last[i] != k_esc) {
      // The text up to the next ESC in one piece ('\r' cannot be in it: `last` follows the last one).
      const std::size_t esc = std::min(last.find(k_esc, i), last.size());
      out.append(last.substr(i, esc - i));
      i = esc;
      continue;
    }
    bool is_color = false;
    const std::size_t n = escape_length(last, i, is_color);
    if (is_color) out.append(last.substr(i, n));
    i += n;
  }
  return out;
}

void append_visible_line(std::string& out, std::string_view raw) {
  if (raw.find('\r') == std::string_view::npos && raw.find(k_esc) == std::string_view::npos) {
    out.append(raw);
    return;
  }
  out += visible_line(raw);
}

std::size_t visible_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == k_esc) {
      bool is_color = false;
      i += escape_length(text, i, is_color);
      continue;
    }
    if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) ++width;
    ++i;
  }
  return width;
}

std::string fit_columns(std::string_view text, int columns) {
  std::string out;
  int shown = 0;
  bool colored = false;
  for (std::size_t i = 0; i < text.size();) {
    if (text[i] == k_esc) {
      bool is_color = false;
      const std::size_t n = escape_length(text, i, is_color);
      colored = colored || is_color;
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    // A UTF-8 continuation byte belongs to the character before it.
    const bool continuation = (static_cast<unsigned char>(text[i]) & 0xc0) == 0x80;
    if (!continuation) {
      if (shown == columns) {
        if (colored) out += "\x1b[0m";
        return out;
      }
      ++shown;
    }
    out += text[i];
    ++i;
  }
  return out;
}

} // namespace air
