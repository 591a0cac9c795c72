#pragma once

#include "core/base/environment.hpp"
#include "core/hw/hardware.hpp"
#include "core/mlflow/tracker.hpp"
#include "core/run/outcome.hpp"
#include "core/run/plan.hpp"
#include "core/spec/spec.hpp"

namespace air::cli {

/// After the ranks are gone: collects results and error files, writes the
/// summary / JUnit files the spec asks for, prints the human report (stderr)
/// and the JSON summary (stdout with --json). Returns air-run's exit code.
/// With MLflow tracking (`tracker`), first finishes the run (status, metrics,
/// the summary as an artifact); the report then ends with the run's link.
int report_run(const LaunchSpec& spec, const Hardware& hardware, const Selection& selection,
               const LaunchPlan& plan, const RunOutcome& outcome, const Environment& env,
               mlflow::Tracker* tracker = nullptr);

} // namespace air::cli
