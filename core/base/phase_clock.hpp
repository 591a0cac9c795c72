#pragma once

#include <string>

// Where one air-run process spends its milliseconds, phase by phase, for
// machines that have no tracer (no strace, no perf). Off unless
// AIR_RUN_PHASES=1 is in air-run's environment; then air-run prints one line
// at its end: `air-run: phases (ms): options 0.21, resolve 0.08, ...`, each
// figure the time since the mark before it. scripts/bench-launch.py
// --breakdown reads that line. Off, a mark is one load and one branch.

namespace air::phases {

/// Turns the marks on when AIR_RUN_PHASES=1 is set; the time of this call is
/// the origin of the first phase. Called once, first thing in main.
void start_from_environment();

/// Whether marks are being taken.
bool enabled();

/// Ends the phase called `name` now: the time since the previous mark (or the
/// start) is that phase's. `name` must outlive the process (a string
/// literal). Only the first 64 marks are kept; later ones are dropped.
void mark(const char* name);

/// "air-run: phases (ms): options 0.21, resolve 0.08, ...\n"; "" when off.
std::string report();

} // namespace air::phases
