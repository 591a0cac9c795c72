#pragma once

#include "core/base/environment.hpp"

#include <string>

// Colour on the console: a distinct colour per rank prefix, so interleaved
// lines of many ranks can be told apart at a glance. Only on a terminal,
// and the user's word wins: NO_COLOR (no-color.org) turns it off, FORCE_COLOR
// turns it on even into a pipe (CI logs that render ANSI).

namespace air {

/// Whether to colour output going to a stream. Pure: `is_tty` is isatty's answer.
/// NO_COLOR (non-empty) wins over FORCE_COLOR (non-empty, not "0"); else a
/// terminal whose TERM is not "dumb".
bool use_color(bool is_tty, const Environment& env);

/// "[rank3]: ", coloured with one of six ANSI colours (by rank) when `color`.
std::string rank_prefix(int rank, bool color);

} // namespace air
