#pragma once

#include "core/report/collect.hpp"

#include <string>

namespace air {

/// The human summary printed to stderr at the end of a run: shorter than
/// torchrun's "Root Cause (first observed failure)" block. A success is one
/// line. A failure gives the outcome line, the root-cause rank with its
/// error-file traceback or its last output lines (indented), one line per
/// other failed rank, and the ranks air-run stopped folded into one line:
///
///   air-run: run r1 failed after 12.4s (exit code 3): rank 1 exited with exit code 3
///     root cause: rank 1 (local_rank 1, pid 4243): exit code 3
///       RuntimeError: boom
///         Traceback (most recent call last):
///         ...
///       log: runs/r1/rank1.log
///     also failed: rank 2 (local_rank 2, pid 4244): signal 11 (SIGSEGV, core dumped)
///     stopped by air-run: ranks 0, 3
///
/// Tracebacks and tails are cut to the last `plan.tail_lines` lines. Then,
/// whatever the status, format_warnings(). In a job of several nodes each
/// line of air-run's own names the plan's node ("air-run (node 1): run ...",
/// name_node()). Pure.
/// `color`: the root cause line in red (a colour terminal, core/run/console_style.hpp).
std::string format_report(const RunReport& report, bool color = false);

/// Output that was lost, which the exit code (the ranks') does not show: a
/// log file that could not be written in full (a full disk), console lines
/// dropped; and the processes the ranks left that air-run ended. One line each:
///
///   air-run: warning: rank 0's log is incomplete: write runs/rank0.log: No space left on device
///   air-run: warning: 1830 lines of rank output not shown on the console (it stopped taking output)
///   air-run: ended 2 processes that the ranks left running
std::string format_warnings(const RunOutcome& outcome);

} // namespace air
