#pragma once

#include "core/base/environment.hpp"
#include "core/hw/hardware.hpp"
#include "core/mlflow/tracker.hpp"
#include "core/pyenv/cache.hpp"
#include "core/run/outcome.hpp"
#include "core/run/plan.hpp"
#include "core/spec/spec.hpp"

#include <optional>
#include <string>

namespace air::cli {

/// After the ranks are gone: collects results and error files, writes the
/// summary / JUnit files the spec asks for, prints the human report (stderr)
/// and the JSON summary (stdout with --json). Returns air-run's exit code.
/// With MLflow tracking (`tracker`), first finishes the run (status, metrics,
/// the summary as an artifact); the report then ends with the run's link.
/// `python_env` is the environment.dependencies environment, for the summary.
int report_run(const LaunchSpec& spec, const Hardware& hardware, const Selection& selection,
               const LaunchPlan& plan, const RunOutcome& outcome, const Environment& env,
               mlflow::Tracker* tracker = nullptr, const PreparedEnv* python_env = nullptr);

/// What was known about a launch when air-run refused it, filled in as the
/// launch gets further: the spec, then the hardware, then the run id.
struct LaunchFacts {
  std::optional<LaunchSpec> spec; ///< nullopt: not even the report paths are known
  bool spec_resolved = false;     ///< false: `spec` comes from the flags alone (the spec file was refused)
  std::optional<Hardware> hardware;
  std::optional<PreparedEnv> python_env;
  std::string run_id; ///< "" until chosen
  int node_rank = 0;  ///< for {node_rank} in report paths
};

/// A launch refused before any rank started still owes CI its reports: writes
/// the summary (status "launch_failed", `outcome.refusal` naming the error),
/// the JUnit file (one failed "launch" case under the job's usual name),
/// GitHub's annotation (on the spec's line when the error names one) and step
/// summary, and the JSON on stdout under --json, wherever `facts.spec` asks
/// for them. Nothing is written when the spec's report paths are unknown. The
/// error itself is printed by the caller, as for every error.
void report_refused_launch(const LaunchFacts& facts, const Error& error, int exit_code,
                           const Environment& env);

} // namespace air::cli
