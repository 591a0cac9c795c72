#pragma once

#include "cli/options.hpp"
#include "core/base/error.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

namespace air::cli {

/// The air-run(1) man page in roff: every visible option under its `--help`
/// heading with its spec key and variable, the spec file keys, the
/// AIR_RUN_* variables, and the examples and exit codes of the footer.
std::string man_page(const CLI::App& app);

/// A completion script for `shell` ("bash" or "zsh"): the option names,
/// file or directory names for the options that take them, the values of
/// options with a fixed set (--rdzv-backend, --accelerator-type's usual
/// types), and file names for TARGET and everything after it.
std::string completion_script(const CLI::App& app, std::string_view shell);

/// Refuses a --print-completion shell other than bash and zsh (usage error:
/// "no completion for fish; supported: bash, zsh").
Status check_completion_shell(std::string_view shell);

/// What a hidden --print-* flag asked for (the docs/spec.md key table, the man page
/// or a completion script); "" when none was given.
std::string generated_document(const CLI::App& app, const CliOptions& options);

} // namespace air::cli
