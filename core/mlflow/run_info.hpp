#pragma once

#include <string>
#include <vector>

namespace air::mlflow {

/// What the JSON summary says about MLflow tracking (its "mlflow" object):
/// filled by the Tracker, rendered by core/report/summary.cpp. Plain data, so the
/// summary needs no MLflow code.
struct RunInfo {
  std::string tracking_uri;        ///< without credentials
  std::string experiment_id;       ///< "" when the run could not be created
  std::string run_id;              ///< ""  when the run could not be created
  std::string parent_run_id;       ///< the run it is nested under, "" when top-level
  std::string link;                ///< the run's page, "" for stores without one
  std::string status;              ///< the final status this node set (FINISHED...), "" when none
  std::string artifact;            ///< the summary's path among the run's artifacts, "" when not uploaded
  std::vector<std::string> errors; ///< what failed, one line each; empty when tracking worked
};

} // namespace air::mlflow
