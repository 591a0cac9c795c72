#pragma once

#include "core/base/error.hpp"
#include "core/mlflow/rest.hpp"
#include "core/mlflow/settings.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace air::mlflow {

/// What creating the launch's run needs.
struct StartRequest {
  std::string experiment_name; ///< looked up, created when missing
  std::string experiment_id;   ///< used when no name is given; "" and no name: MLflow's Default ("0")
  std::string parent_run_id;   ///< the run becomes its child, in the parent's experiment
  std::string run_name;
  std::int64_t start_time_ms = 0;
  std::vector<KeyValue> tags;   ///< set at creation (mlflow.parentRunId included when nested)
  std::vector<KeyValue> params; ///< logged after creation, while the ranks start (REST)
  /// Unique to this launch, also among `tags` as air.launch_token: a run
  /// creation whose answer was lost is found again by it instead of repeated.
  std::string launch_token;
};

/// The tag that carries StartRequest::launch_token.
inline constexpr const char* k_launch_token_tag = "air.launch_token";

/// A file logged beside the run's artifact (the run's HTML page): its name
/// in the run, and its content, rendered after the artifact's. The REST
/// store renders it on the thread of its upload, so that drawing it overlaps
/// the artifact's upload: `content` must read only what no one changes
/// until finish() returns.
struct MoreArtifact {
  std::string name;
  std::string content_type; ///< of the REST upload, e.g. "text/html; charset=utf-8"
  std::function<std::string()> content;
};

/// What ending the run records. `status` "" leaves the status alone (nodes
/// other than node 0 log their ranks' metrics only).
struct FinishRequest {
  RunRef run;
  std::vector<MetricPoint> metrics;
  std::vector<KeyValue> tags;
  std::string status; ///< FINISHED, FAILED or KILLED
  std::int64_t end_time_ms = 0;
  std::string artifact_name; ///< "" = no artifact
  /// Renders the artifact's content once the status is recorded, so the copy
  /// in the store tells what happened up to its own upload.
  std::function<std::string()> artifact_content;
  /// Uploaded with the artifact, side by side, only when it is (same place,
  /// same deadline); each failure is one more error line.
  std::vector<MoreArtifact> more_artifacts;
};

/// How ending went, step by step.
struct FinishResult {
  std::string status_set;    ///< the status recorded, "" when none was
  std::string artifact_path; ///< the artifact's path in the run, "" when not uploaded (or not taken)
  std::vector<std::string> more_paths; ///< the paths of the more_artifacts uploaded
  std::vector<std::string> errors;     ///< one line per failed step
};

/// A created run, with the steps after creation that failed (params not
/// logged): the run exists, so tracking goes on.
struct Started {
  RunRef run;
  std::string parent_run_id; ///< the run it was nested under: "" when top-level
  /// Things to tell that are no failure of tracking: a parent run (MLFLOW_RUN_ID)
  /// that is gone, deleted or over, so the run became a top-level one.
  std::vector<std::string> warnings;
  std::vector<std::string> errors;
};

/// One way of reaching a tracking store: REST (tracking server, Databricks)
/// or the mlflow Python package (file:, sqlite:, ...).
class Store {
public:
  virtual ~Store() = default;
  /// Finds or creates the experiment, creates the run and logs its params
  /// (the REST store in the background: their outcome comes with finish()).
  /// A parent run that does not exist, is deleted or is not RUNNING is not
  /// nested under (a warning says so). Errors (system kind) say what failed
  /// and after how long. Without `stop`, on the main thread: a SIGINT,
  /// SIGTERM or SIGHUP ends it (interrupted_by()). With `stop`, on a worker
  /// thread (starts_in_background()): it takes no signal and ends, as
  /// "interrupted", once *stop is true.
  virtual Expected<Started> start(const StartRequest& request, const std::atomic<bool>* stop) = 0;
  /// Whether start() may run on a worker thread while the ranks start.
  virtual bool starts_in_background() const = 0;
  /// Called on the main thread, as early as the launch can (Tracker::warm_up)
  /// and again before start() goes to a worker thread: the Python store
  /// starts its helper process here, once (a child's death signal follows
  /// the thread that started it). Failures come from start() or finish().
  virtual void prepare() {}
  /// Logs metrics and tags, sets the status, uploads the artifact.
  virtual FinishResult finish(const FinishRequest& request) = 0;
  /// The signal that interrupted the last call (retries stop at once), or 0.
  virtual int interrupted_by() const = 0;
};

/// The store for a configuration (REST or Python).
std::unique_ptr<Store> make_store(const TrackingConfig& config, const Environment& env);

} // namespace air::mlflow
