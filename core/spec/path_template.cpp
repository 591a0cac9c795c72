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

std::string fill_run_placeholders(std::string_view text, std::string_view run_id, int node_rank) {
  return substitute_placeholder(substitute_placeholder(text, "run_id", run_id), "node_rank",
                                std::to_string(node_rank));
}

std::string with_run_folder(std::string_view log_dir) {
  if (log_dir.empty() || log_dir.find("{run_id}") != std::string_view::npos) return std::string(log_dir);
  const std::size_t rank = log_dir.find("{rank}");
  if (rank == std::string_view::npos) {
    std::string out(log_dir);
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    return out + (out == "/" ? "{run_id}" : "/{run_id}");
  }
  // Before the path segment that holds {rank}: logs/{run_id}/{rank}.
  const std::size_t slash = log_dir.rfind('/', rank);
  const std::size_t at = slash == std::string_view::npos ? 0 : slash + 1;
  return std::string(log_dir.substr(0, at)) + "{run_id}/" + std::string(log_dir.substr(at));
}

} // namespace air
