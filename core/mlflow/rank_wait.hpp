#pragma once

#include "core/run/stacks.hpp"

// The MLflow run's rank-side wait. air-run creates the run while the ranks
// start, so that its round trips to the tracking server overlap the ranks'
// imports; each rank gets the run (MLFLOW_RUN_ID & co.) from a file air-run
// writes once the creation is over, waiting for it only when the rank first
// looks for the run. That Python lives here, with the rest of MLflow
// (core/mlflow/python/air_run_mlflow_wait.py), and joins the rank's
// sitecustomize as a part that run/ does not know by name.

namespace air {

/// The wait, as a part of the stack shim (stack_shim_source): its Python,
/// built into the binary, and the call that starts it. Pure.
ShimPart mlflow_rank_wait_part();

} // namespace air
