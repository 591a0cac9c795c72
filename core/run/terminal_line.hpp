#pragma once

#include <cstddef>
#include <string>
#include <string_view>

// How a rank's line looks on a terminal, for the lines air-run draws itself
// (a rank's unfinished progress line under the output, and the finished
// line once it scrolls up). Pure.

namespace air {

/// The line as a terminal leaves it, near enough: what follows its last
/// carriage return (a progress bar's latest state; a "\r\n" ending does not
/// blank it), with escape sequences that move the cursor, erase or change
/// modes removed, since they would move air-run's own drawing; colour (SGR)
/// stays. "  5%|#  |\r 50%|##### |" -> " 50%|##### |".
std::string visible_line(std::string_view raw);

/// Appends visible_line(`raw`) to `out`; a line without '\r' or escape
/// sequence (nearly every line) is appended as it is, with no copy of its own.
void append_visible_line(std::string& out, std::string_view raw);

/// How many characters `text` takes on screen (UTF-8 code points; escape sequences take none).
std::size_t visible_width(std::string_view text);

/// `text` cut to at most `columns` characters on screen (UTF-8 code points;
/// colour codes take none), with the colour reset after a cut coloured text.
std::string fit_columns(std::string_view text, int columns);

} // namespace air
