#include "core/report/traceback.hpp"

namespace air {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

} // namespace

std::string relative_to(const std::string& path, const std::string& workspace) {
  if (workspace.empty()) return path;
  std::string base = workspace;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (path.size() > base.size() + 1 && path.compare(0, base.size(), base) == 0 && path[base.size()] == '/')
    return path.substr(base.size() + 1);
  return path;
}

std::string job_name(const LaunchSpec& spec) {
  const auto file_stem = [](std::string_view path) {
    const auto slash = path.find_last_of('/');
    if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
    for (std::string_view ext : {".yaml", ".yml", ".py"}) {
      if (ends_with(path, ext) && path.size() > ext.size()) {
        path.remove_suffix(ext.size());
        break;
      }
    }
    return std::string(path);
  };
  if (!spec.spec_path.empty()) return file_stem(spec.spec_path);
  const auto& command = spec.command.value;
  if (command.empty()) return "air-run";
  return file_stem(command.front());
}

} // namespace air
