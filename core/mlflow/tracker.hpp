#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/mlflow/record.hpp"
#include "core/mlflow/run_info.hpp"
#include "core/mlflow/settings.hpp"
#include "core/mlflow/store.hpp"
#include "core/run/outcome.hpp"
#include "core/run/plan.hpp"
#include "core/spec/spec.hpp"

#include <functional>
#include <memory>
#include <string>

namespace air::mlflow {

/// The artifact name of the JSON summary in the run.
inline constexpr const char* k_summary_artifact = "air-run-summary.json";

/// The MLflow run of one launch, from creation before any rank starts to
/// the final status after the last one exits. air-run owns the run: the
/// ranks only log into it (MLFLOW_RUN_ID), and the status they leave on exit
/// is overwritten here. Tracking never costs the training: a store that
/// fails is retried for mlflow.timeout, then the run goes on with one
/// warning (unless mlflow.required), and the summary says what failed.
class Tracker {
public:
  /// nullptr when no tracking URI is configured: then nothing MLflow-related
  /// happens at all. Errors (usage, exit 2) come from the configuration.
  static Expected<std::unique_ptr<Tracker>> create(const LaunchSpec& spec, const Environment& env);

  const TrackingConfig& config() const { return config_; }

  /// One line for --dry-run: what would be created where.
  std::string describe() const;

  /// Node 0: creates the run and logs the launch's params; prints the link.
  /// On failure: with mlflow.required an error (usage, exit 2: nothing is
  /// launched), else one warning and an untracked run. interrupted_by() tells
  /// whether a signal ended the attempt.
  Status start(const LaunchFacts& facts);

  /// Other nodes: the run node 0 created (from the control connection);
  /// empty ids when node 0 has none, which the summary then reports.
  void adopt(const std::string& experiment_id, const std::string& run_id);

  /// Whether a run exists to log into.
  bool has_run() const { return !run_.run_id.empty(); }
  const RunRef& run() const { return run_; }

  /// Gives every rank MLFLOW_TRACKING_URI, MLFLOW_RUN_ID and MLFLOW_EXPERIMENT_ID
  /// (and drops an inherited MLFLOW_EXPERIMENT_NAME, which could name another
  /// experiment than the run's). A tracking server's URI goes without its
  /// `user:password@`, which goes as MLFLOW_TRACKING_USERNAME/_PASSWORD. Without
  /// a run, the three variables are taken out of the ranks' environment.
  void add_rank_environment(LaunchPlan& plan) const;

  /// After the last rank exited: sets the final status (when `set_status`,
  /// node 0), logs this node's metrics and tags, and uploads the summary
  /// (rendered by `render_summary` once the status is recorded) where the
  /// store takes artifacts. Failures become a warning and summary errors.
  void finish(const RunOutcome& outcome, int exit_code, bool set_status,
              const std::function<std::string()>& render_summary);

  /// Node 0, when the launch ends before supervising after the run was
  /// created: FAILED for a target that cannot start or a node that never
  /// joined, KILLED for an interrupt (`status` says which).
  void abandon(RunOutcome::Status status, int exit_code);

  /// The summary's "mlflow" object.
  const RunInfo& info() const { return info_; }

  /// The final report's MLflow line: the link, or why there is no run.
  std::string report_line() const;

  /// The signal that interrupted start() or finish(), 0 when none did.
  int interrupted_by() const { return interrupted_by_; }

private:
  Tracker(TrackingConfig config, Environment env);
  std::string where() const; ///< "the tracking server at http://..."

  TrackingConfig config_;
  Environment env_;
  std::unique_ptr<Store> store_;
  RunRef run_;
  RunInfo info_;
  int interrupted_by_ = 0;
};

} // namespace air::mlflow
