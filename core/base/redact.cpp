#include "core/base/redact.hpp"

#include <cctype>

namespace air {

bool looks_secret(std::string_view name) {
  std::string upper;
  for (char c : name) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const char* word : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH"}) {
    if (upper.find(word) != std::string::npos) return true;
  }
  return false;
}

std::string redact_urls(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t scheme = text.find("://", pos);
    if (scheme == std::string_view::npos) break;
    const std::size_t start = scheme + 3;
    // The authority ends at the first '/', '?', '#' or space; its userinfo at its last '@'.
    std::size_t end = start;
    while (end < text.size() && text[end] != '/' && text[end] != '?' && text[end] != '#' &&
           std::isspace(static_cast<unsigned char>(text[end])) == 0)
      ++end;
    const std::string_view authority = text.substr(start, end - start);
    const std::size_t at = authority.rfind('@');
    out.append(text.substr(pos, start - pos));
    if (at != std::string_view::npos) {
      const std::string_view userinfo = authority.substr(0, at);
      const std::size_t colon = userinfo.find(':');
      if (colon != std::string_view::npos) {
        out.append(userinfo.substr(0, colon + 1));
        out.append(k_redacted);
      } else {
        out.append(k_redacted);
      }
      out.append(authority.substr(at));
    } else {
      out.append(authority);
    }
    pos = end;
  }
  out.append(text.substr(pos));
  return out;
}

std::string redact_variable(std::string_view name, std::string_view value) {
  if (looks_secret(name)) return std::string(k_redacted);
  return redact_urls(value);
}

} // namespace air
