#pragma once

#include <deque>
#include <string>
#include <string_view>
#include <vector>

// A rank's last output lines as the reports show them: what a terminal would
// have shown, with a Python traceback's header on a line of its own. Pure.

namespace air {

/// One raw tail line as reports show it: visible_line's text after the last
/// carriage return (a progress bar's latest state, not every '\r' of it),
/// split in two where a traceback's header ("Traceback (most recent call
/// last):", after torch's "[rankN]: " prefix or not) follows other text on
/// the line: a `\r` progress bar left without a newline glues its last state
/// before the header, off a terminal (CI, nohup, Slurm logs).
/// "\r 50%|#####|Traceback (most recent call last):" ->
/// {" 50%|#####|", "Traceback (most recent call last):"}.
std::vector<std::string> shown_lines(std::string_view raw);

/// Every line of `tail` through shown_lines, in order.
std::vector<std::string> shown_tail(const std::deque<std::string>& tail);

/// The tail's lines joined by '\n' (no trailing one), as a rank error's traceback.
std::string shown_tail_text(const std::deque<std::string>& tail);

/// The last line shown of `tail` (the summary's last_line); "" when it is empty.
std::string shown_last_line(const std::deque<std::string>& tail);

} // namespace air
