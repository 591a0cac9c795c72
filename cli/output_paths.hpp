#pragma once

#include "core/base/error.hpp"
#include "core/spec/spec.hpp"

#include <string>

namespace air::cli {

/// Checks every path a run writes before its first rank starts (and with
/// --dry-run, which makes nothing): a report file (summary_file, junit_file)
/// must not be a directory and its folder must be creatable and writable; the
/// log directory must not be a file. Finding out after hours of training that
/// --summary names a folder loses the report. `create` makes the report
/// files' folders (a real launch); without it only what exists is looked at.
/// On a refusal, `refused_key` names the key whose path was refused
/// ("summary_file", "junit_file" or "log_dir"), so that the refused launch's
/// own report does not try the same path again.
Status check_output_paths(const LaunchSpec& spec, bool create, std::string* refused_key);

} // namespace air::cli
