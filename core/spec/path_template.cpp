#include "core/spec/path_template.hpp"

namespace air {

Status check_placeholders(std::string_view text, std::initializer_list<std::string_view> allowed,
                          std::string_view what) {
  std::string known;
  for (const auto name : allowed) known += (known.empty() ? "{" : ", {") + std::string(name) + "}";
  for (std::size_t at = text.find('{'); at != std::string_view::npos; at = text.find('{', at + 1)) {
    const auto close = text.find('}', at);
    if (close == std::string_view::npos)
      return usage_error(std::string(what) + ": unclosed '{' in \"" + std::string(text) + "\"");
    const std::string_view name = text.substr(at + 1, close - at - 1);
    bool ok = false;
    for (const auto a : allowed) ok = ok || a == name;
    if (!ok) {
      return usage_error(std::string(what) + ": unknown placeholder {" + std::string(name) + "} in \"" +
                         std::string(text) + "\"; known here: " + known);
    }
  }
  return ok_status();
}

std::string substitute_placeholder(std::string_view text, std::string_view name, std::string_view value) {
  const std::string token = "{" + std::string(name) + "}";
  std::string out;
  std::size_t from = 0;
  for (auto at = text.find(token); at != std::string_view::npos; at = text.find(token, from)) {
    out.append(text.substr(from, at - from));
    out.append(value);
    from = at + token.size();
  }
  out.append(text.substr(from));
  return out;
}

} // namespace air
