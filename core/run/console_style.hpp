#pragma once

#include "core/base/environment.hpp"

#include <chrono>
#include <string>
#include <string_view>

// Colour on the console: a distinct colour per rank prefix, so interleaved
// lines of many ranks can be told apart at a glance. Only on a terminal,
// and the user's word wins: NO_COLOR (no-color.org) turns it off, FORCE_COLOR
// turns it on even into a pipe (CI logs that render ANSI).

namespace air {

/// Whether to colour output going to a stream. Pure: `is_tty` is isatty's answer.
/// NO_COLOR (non-empty) wins over FORCE_COLOR (non-empty, not "0"); else a
/// terminal whose TERM is not "dumb".
bool use_color(bool is_tty, const Environment& env);

/// How a piece of air-run's own text is set apart on a colour terminal.
enum class Paint {
  dim, ///< notices: there to be read when needed, not to compete with rank output
  red, ///< the root cause of a failed run
};

/// `text` wrapped in Paint's escape codes when `color`, else unchanged.
/// A trailing newline stays outside the codes.
std::string paint(std::string_view text, Paint how, bool color);

/// "12:03:04.567 ": the local wall-clock time that starts a rank line under --timestamps.
std::string clock_stamp(std::chrono::system_clock::time_point t);

/// "[rank3]: ", coloured with one of six ANSI colours (by rank) when `color`.
std::string rank_prefix(int rank, bool color);

} // namespace air
