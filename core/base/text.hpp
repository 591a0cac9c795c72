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

/// What strip_control_characters does with line breaks and tabs.
enum class LineBreaks {
  replace, ///< '\n' and '\t' become '?' like every other control character (one line of text)
  keep,    ///< '\n' and '\t' stay (a traceback, the last lines of a rank's output)
};

/// `text` with every control character (C0 including NUL, DEL, and the C1
/// range U+0080..U+009F as UTF-8) replaced by '?'. Text from outside (a
/// peer's words, a rank's output or error file) goes through this before
/// air-run prints it or writes it into a report: an escape sequence there
/// could rewrite the user's terminal (title, clipboard, cursor), and a NUL
/// byte would cut a C string short. Other bytes, invalid UTF-8 included, stay.
std::string strip_control_characters(std::string_view text, LineBreaks line_breaks = LineBreaks::replace);

/// Splits a command written as one string on whitespace, honouring '...' and
/// "..." quoting and backslash escapes, as a simple shell would.
/// Errors name `what` ("...: unterminated quote in 'train.py \"x'").
Expected<std::vector<std::string>> split_command_line(std::string_view text, std::string_view what);

} // namespace air
