#pragma once

#include "core/base/environment.hpp"
#include "core/report/collect.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// Whether to print GitHub Actions workflow commands: GITHUB_ACTIONS=true,
/// which the runner sets for every step.
bool github_actions_enabled(const Environment& env);

/// Escapes the message part of a workflow command: % -> %25, CR -> %0D,
/// LF -> %0A (GitHub's escapeData), so a multi-line traceback stays one command.
std::string escape_workflow_data(std::string_view text);

/// Escapes a property value (title=...): escape_workflow_data plus
/// : -> %3A and , -> %2C (GitHub's escapeProperty).
std::string escape_workflow_property(std::string_view text);

/// `::error title=air-run rank N::<message>` lines, one per rank that failed
/// on its own; the message is the rank's end ("exit code 3"), its error
/// ("RuntimeError: boom") and its traceback or output tail. A run that timed
/// out, was interrupted or could not be launched without a failed rank gets
/// one `::error title=air-run::<reason>` line. A success gets none. Pure.
/// When the failing rank's traceback names a frame, the command carries
/// `file=` (relative to `workspace`, GITHUB_WORKSPACE, when inside it) and
/// `line=`, so GitHub shows the error on that line of the diff. A refused
/// spec's place ("job.yaml:2:1: ...") is relative to air-run's working
/// directory `cwd`: it is read from there, then made relative to `workspace`
/// like a frame ("ci/job.yaml" for `air-run job.yaml` run in $GITHUB_WORKSPACE/ci).
std::vector<std::string> github_annotations(const RunReport& report, const std::string& workspace = "",
                                            const std::string& cwd = "");

/// A place in a file that an error message starts with.
struct SourcePlace {
  std::string file;
  int line = 0;
};

/// The place a message names at its start, as spec errors do
/// ("job.yaml:2:1: unknown key ..." -> job.yaml, 2); nullopt when it names none.
std::optional<SourcePlace> message_place(std::string_view message);

/// The Markdown that goes into $GITHUB_STEP_SUMMARY: a heading with the
/// outcome, the reason, and one table row per rank (status, time, the
/// exception line of a failed rank). Pure.
std::string github_step_summary(const RunReport& report);

} // namespace air
