#pragma once

#include "core/base/error.hpp"

#include <string>
#include <string_view>
#include <vector>

// Small text helpers shared by every layer. Pure; ASCII only, as every
// grammar air-run reads (keys, durations, GPU names, Slurm lists) is ASCII.

namespace air {

/// True for '0'..'9' only (not locale digits).
bool is_digit(char c);

/// True when `text` is non-empty and every character is a digit.
bool all_digits(std::string_view text);

/// `text` without leading and trailing blanks (space, tab, CR, LF, FF, VT).
std::string_view trim(std::string_view text);

/// ASCII lower case.
std::string lower(std::string_view text);

/// ASCII upper case.
std::string upper(std::string_view text);

/// 'text' in single quotes, the way error messages quote a user's value.
std::string single_quoted(std::string_view text);

/// Parts separated by `separator`.
std::string join(const std::vector<std::string>& parts, std::string_view separator);

/// Splits a command written as one string on whitespace, honouring '...' and
/// "..." quoting and backslash escapes, as a simple shell would.
/// Errors name `what` ("...: unterminated quote in 'train.py \"x'").
Expected<std::vector<std::string>> split_command_line(std::string_view text, std::string_view what);

} // namespace air
