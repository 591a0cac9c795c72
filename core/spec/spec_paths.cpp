#include "core/spec/spec_paths.hpp"

#include <filesystem>
#include <initializer_list>

namespace air {
namespace {

/// `path` as seen from `spec_dir`; unchanged when absolute or empty.
std::string anchored(const std::filesystem::path& spec_dir, const std::string& path) {
  if (path.empty() || path.front() == '/') return path;
  return (spec_dir / path).lexically_normal().string();
}

/// Anchors one path-valued setting when the spec file gave it.
void anchor(const std::filesystem::path& spec_dir, Setting<std::string>& setting) {
  if (setting.origin.kind == Origin::Kind::file) setting.value = anchored(spec_dir, setting.value);
}

} // namespace

void anchor_spec_paths(LaunchSpec& spec) {
  if (spec.spec_path.empty() || spec.spec_path == k_stdin_spec_name) return;
  const auto spec_dir = std::filesystem::path(spec.spec_path).parent_path();
  if (spec_dir.empty()) return; // the file is in the working directory: nothing changes

  for (Setting<std::string>* path : {&spec.log_dir, &spec.summary_file, &spec.junit_file, &spec.html_file,
                                     &spec.env_cache_dir, &spec.checkpoint_dir})
    anchor(spec_dir, *path);
  // A program name without '/' is looked up in PATH, as a shell does.
  if (spec.python.origin.kind == Origin::Kind::file && spec.python.value.find('/') != std::string::npos)
    spec.python.value = anchored(spec_dir, spec.python.value);

  auto& command = spec.command.value;
  if (spec.command.origin.kind != Origin::Kind::file || command.empty() || spec.module.value) return;
  const bool is_path = command.front().ends_with(".py") || command.front().find('/') != std::string::npos;
  if (is_path) command.front() = anchored(spec_dir, command.front());
}

} // namespace air
