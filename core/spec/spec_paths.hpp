#pragma once

#include "core/spec/spec.hpp"

#include <string_view>

namespace air {

/// The name a spec read from standard input (`-f -`) has in messages and origins.
inline constexpr std::string_view k_stdin_spec_name = "<stdin>";

/// Makes the relative paths written in the spec file relative to that file's
/// folder (as docker-compose does), so `air-run -f configs/job.yaml` means the
/// same from any directory: the script of `command`, `log_dir`,
/// `summary_file`, `junit_file`, `env_cache_dir`, `checkpoint_dir`, and `environment.python`
/// when it is a path. Values from flags and AIR_RUN_* variables, bare program
/// names (looked up in PATH), modules and absolute paths are left as they are,
/// and so is everything when the spec came from standard input: those stay
/// relative to the working directory. (environment.dependencies and
/// find_links are anchored where pip's arguments are built, core/pyenv/cache.cpp.)
void anchor_spec_paths(LaunchSpec& spec);

} // namespace air
