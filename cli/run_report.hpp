#pragma once

#include "core/environment.hpp"
#include "core/hardware.hpp"
#include "core/plan.hpp"
#include "core/spec.hpp"
#include "core/supervisor.hpp"

namespace air::cli {

/// After the ranks are gone: collects results and error files, writes the
/// summary / JUnit files the spec asks for, prints the human report (stderr)
/// and the JSON summary (stdout with --json). Returns air-run's exit code.
int report_run(const LaunchSpec& spec, const Hardware& hardware, const Selection& selection,
               const LaunchPlan& plan, const RunOutcome& outcome, const Environment& env);

} // namespace air::cli
