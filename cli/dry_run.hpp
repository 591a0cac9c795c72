#pragma once

#include "core/hw/hardware.hpp"
#include "core/mlflow/tracker.hpp"
#include "core/pyenv/cache.hpp"
#include "core/run/plan.hpp"

#include <string>
#include <vector>

namespace air::cli {

/// What `--dry-run` prints on stdout about the launch it stops before: the
/// resolved spec (as the user gave it, before the Python environment replaced
/// the interpreter), the hardware, the selection's notices, the Python
/// environment when there is one (`python_env` nullptr otherwise), MLflow
/// (`tracker` nullptr without a tracking URI) and the plan.
void print_dry_run(const std::vector<std::string>& spec_lines, const Hardware& hardware,
                   const Selection& selection, const PreparedEnv* python_env, const mlflow::Tracker* tracker,
                   const LaunchPlan& plan);

} // namespace air::cli
