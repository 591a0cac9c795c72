#pragma once

#include "core/base/environment.hpp"
#include "core/hw/hardware.hpp"
#include "core/mlflow/rest.hpp"
#include "core/run/outcome.hpp"
#include "core/spec/spec.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace air::mlflow {

/// What is known about a launch before it starts: the source of the run's
/// params and tags. Filled by the CLI; pure data.
struct LaunchFacts {
  int world_size = 0; ///< ranks on every node together
  int num_nodes = 1;
  std::string accelerator_type; ///< "GPU_2xH200" or "CPU"
  std::optional<Millis> timeout;
  std::vector<std::string> command; ///< target and its arguments
  std::string air_run_id;
  std::string host;
  std::string user;                      ///< $USER, for mlflow.user
  std::vector<GpuInfo> gpus;             ///< this node's selected GPUs, in local-rank order
  std::optional<std::string> git_commit; ///< of the working directory
};

/// Gathers the facts from the resolved launch; reads the host name, $USER
/// (or $LOGNAME) and the git commit of the working directory.
LaunchFacts gather_launch_facts(const LaunchSpec& spec, const Selection& selection, int num_nodes,
                                const std::string& air_run_id, const Environment& env);

/// The run's params: ranks, accelerator_type, nodes, timeout_s, target, args,
/// air_run_version, air_run_id.
std::vector<KeyValue> launch_params(const LaunchFacts& facts);

/// The tags set at creation: mlflow.user, mlflow.source.name (the target),
/// mlflow.source.type, mlflow.source.git.commit (when known),
/// mlflow.parentRunId (when nested), air.run_id, air.host, air.gpus
/// ("0: NVIDIA H100 80GB HBM3 (GPU-...), 1: ..."), then the user's mlflow.tags,
/// which may override any of them.
std::vector<KeyValue> launch_tags(const LaunchFacts& facts, const std::string& parent_run_id,
                                  const std::map<std::string, std::string>& user_tags);

/// The run's final MLflow status: FINISHED for success, KILLED for a timeout
/// or an interrupt (air-run stopped it), FAILED otherwise.
std::string final_status(RunOutcome::Status status);

/// The metrics logged at the end, all at `timestamp_ms`, step 0:
/// `exit_code` and `duration_s` of the launch (when `whole_run`, i.e. on node
/// 0), and per rank of this node `rank_<r>/exit_code` (128+N for signal N) and
/// `rank_<r>/peak_rss_mb`. Ranks that never started have none.
std::vector<MetricPoint> final_metrics(const RunOutcome& outcome, int exit_code, bool whole_run,
                                       std::int64_t timestamp_ms);

/// The tags set at the end (node 0): air.status ("succeeded", "timed_out", ...)
/// and air.exit_code.
std::vector<KeyValue> final_tags(const RunOutcome& outcome, int exit_code);

} // namespace air::mlflow
