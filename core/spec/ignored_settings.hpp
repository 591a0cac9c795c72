#pragma once

#include "core/spec/spec.hpp"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// The variables air-run sets in every rank itself; an `env` entry of the
/// same name never reaches a rank (a stale RANK must not win).
std::span<const std::string_view> launcher_variables();

/// Warnings, as whole lines, for settings that a run of this size ignores, so
/// that nothing is dropped without a word: console_ranks (--ranks) and
/// local_ranks_filter naming ranks the run does not have (their output is
/// never shown), and `env` entries for variables air-run sets itself
/// ("air-run: warning: --ranks: rank 5 is not in this run (ranks 0-1); no rank's output is shown").
std::vector<std::string> ignored_settings_warnings(const LaunchSpec& spec, int world_size,
                                                   int ranks_per_node);

} // namespace air
