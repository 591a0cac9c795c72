#include "core/mlflow/rank_wait.hpp"

#include "core/mlflow/python/air_run_mlflow_wait_py.hpp"

namespace air {

ShimPart mlflow_rank_wait_part() { return {embedded_python::air_run_mlflow_wait(), "_air_run_mlflow_run()"}; }

} // namespace air
