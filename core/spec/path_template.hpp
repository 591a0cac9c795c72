#pragma once

#include "core/base/error.hpp"

#include <initializer_list>
#include <string>
#include <string_view>

// Placeholders in report and log paths, so that runs keep their files apart:
// `--log-dir logs/{run_id}`, `--summary out/{run_id}/summary.json`,
// `--log-dir logs/{run_id}/{rank}` (a folder per rank). The values are known
// only at launch (the run id is node 0's), so checking and substituting are
// two steps: a typo is an error before anything starts.

namespace air {

/// Checks that every `{name}` in `text` is one of `allowed`. An unknown or
/// unclosed placeholder is a usage error (exit 2) naming `what` (the key and
/// its flag) and the names it accepts. Pure.
Status check_placeholders(std::string_view text, std::initializer_list<std::string_view> allowed,
                          std::string_view what);

/// The log folder with a per-run subfolder, so that a second run never
/// overwrites (or mixes stale files into) the first: `logs` becomes
/// `logs/{run_id}`, `logs/{rank}` becomes `logs/{run_id}/{rank}`. A folder
/// that names `{run_id}` already is left as it is. Pure.
std::string with_run_folder(std::string_view log_dir);

/// `text` with every `{name}` replaced by `value`. Pure.
std::string substitute_placeholder(std::string_view text, std::string_view name, std::string_view value);

/// `text` with the run's own placeholders filled: `{run_id}` and `{node_rank}`
/// (`{rank}` stays, for the planner to fill per rank). Pure.
std::string fill_run_placeholders(std::string_view text, std::string_view run_id, int node_rank);

} // namespace air
