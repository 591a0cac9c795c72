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

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace air::mlflow {

/// The artifact name of the JSON summary in the run.
inline constexpr const char* k_summary_artifact = "air-run-summary.json";
/// The artifact name of the run's HTML page, beside the summary.
inline constexpr const char* k_page_artifact = "air-run.html";

/// Python ranks started before the run exists: the file air-run writes once
/// the run's creation is over (the shim's part
/// core/mlflow/python/air_run_mlflow_wait.py waits for it when the rank's
/// code first looks for the run), and
/// how many seconds a rank waits for it before it goes on untracked.
inline constexpr const char* k_run_file_var = "AIR_RUN_MLFLOW_RUN_FILE";
inline constexpr const char* k_run_wait_var = "AIR_RUN_MLFLOW_RUN_WAIT";

/// What the ranks are handed about the run: variables to set, and variables
/// to take out of their environment first.
struct RankVariables {
  std::map<std::string, std::string> set;
  std::vector<std::string> unset;
};

/// The variables of ranks logging into `run`: MLFLOW_TRACKING_URI (a
/// tracking server's without its `user:password@`, which go as
/// MLFLOW_TRACKING_USERNAME/_PASSWORD), MLFLOW_RUN_ID, MLFLOW_EXPERIMENT_ID,
/// and MLFLOW_EXPERIMENT_NAME taken out (it could name another experiment).
/// `run` nullptr (no run): the three variables taken out, whatever the
/// caller's environment named. Pure.
RankVariables rank_variables(const TrackingConfig& config, const RunRef* run);

/// The content of the run's file for the shim: NUL-terminated entries, first
/// each name to take out alone, then each `NAME=VALUE` to set. No JSON: the
/// shim would import json (and re), 10 to 20 ms in every rank. Pure.
std::string rank_variables_file(const RankVariables& vars);

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

  ~Tracker();
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  /// Starts what the store needs before it can answer, as early as the
  /// launch can: the Python store's helper, which imports mlflow for seconds
  /// (also on the other nodes, which log their ranks' metrics through it).
  /// Nothing for a tracking server. Failures come with begin() or finish().
  void warm_up() { store_->prepare(); }

  /// Node 0: begins creating the run (and logging the launch's params). With
  /// `in_background`, a REST store works on a thread of its own, so the
  /// launch goes on meanwhile; settle() waits for it. Else (and always for
  /// the Python store's helper) here, as the launch waits for it anyway.
  /// Prints the link once the run exists.
  void begin(const LaunchFacts& facts, bool in_background);

  /// Waits for the creation begun by begin(); a SIGINT, SIGTERM or SIGHUP
  /// ends the wait (interrupted_by()). On failure: with mlflow.required an
  /// error (usage, exit 2: nothing is launched), else one warning and an
  /// untracked run. Nothing to wait for (other nodes, a second call): the
  /// same answer at once.
  Status settle();

  /// Whether the ranks of `plan` may start before the run exists: Python
  /// ranks run air-run's shim, which waits for the run's file before any
  /// user code. Others (--no-python, --preload's forked ranks) need the run
  /// in their environment when they start: settle() first.
  static bool ranks_can_wait(const LaunchPlan& plan);

  /// Other nodes: the run node 0 created (from the control connection);
  /// empty ids when node 0 has none, which the summary then reports.
  void adopt(const std::string& experiment_id, const std::string& run_id);

  /// Whether a run exists to log into. Only once settled (or adopted).
  bool has_run() const { return !run_.run_id.empty(); }
  const RunRef& run() const { return run_; }

  /// Gives every rank the run's variables (rank_variables). While the run
  /// is still being created (ranks_can_wait ranks only), the ranks get none
  /// of them yet but k_run_file_var and k_run_wait_var: the run's file, in a
  /// private folder under $TMPDIR, written once the creation is over.
  void add_rank_environment(LaunchPlan& plan);

  /// After the last rank exited: sets the final status (when `set_status`,
  /// node 0), logs this node's metrics and tags, and uploads the summary
  /// (rendered by `render_summary` once the status is recorded) where the
  /// store takes artifacts. Failures become a warning and summary errors.
  /// With `render_page`, the run's HTML page (k_page_artifact) goes beside
  /// the summary, side by side with it, drawn after it.
  void finish(const RunOutcome& outcome, int exit_code, bool set_status,
              const std::function<std::string()>& render_summary,
              const std::function<std::string()>& render_page = nullptr);

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
  /// Takes the store's answer to the creation: run, link, warnings, errors.
  void record_start(Expected<Started> started, bool stopped);
  /// Marks the creation over and writes the run's file when ranks wait for it.
  void publish();
  /// The ranks' variables now: no run while the creation is still going on.
  RankVariables current_variables() const;

  TrackingConfig config_;
  Environment env_;
  std::unique_ptr<Store> store_;
  RunRef run_;
  RunInfo info_;
  int interrupted_by_ = 0;
  Status start_status_ = ok_status();
  std::atomic<bool> stop_{false}; ///< ends the creation on its thread (Ctrl-C, the end of the run)
  std::thread creating_;          ///< the creation, while the ranks start
  std::mutex mutex_;              ///< guards done_ and run_file_ between the two threads
  std::condition_variable over_;  ///< done_ became true
  bool done_ = true;              ///< no creation going on (over, or none begun): run_ is final
  std::string run_file_;          ///< where the outcome goes for waiting ranks, "" = none wait
  std::string run_file_dir_;      ///< its private folder, removed with the tracker
};

} // namespace air::mlflow
