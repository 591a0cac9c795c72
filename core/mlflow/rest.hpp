#pragma once

#include "core/base/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air::mlflow {

/// A param or tag: MLflow's `{"key": ..., "value": ...}`.
struct KeyValue {
  std::string key;
  std::string value;
};

/// One metric point: MLflow's `{"key", "value", "timestamp" (unix ms), "step"}`.
struct MetricPoint {
  std::string key;
  double value = 0;
  std::int64_t timestamp = 0;
  std::int64_t step = 0;
};

/// What a created (or looked-up) run is known by.
struct RunRef {
  std::string experiment_id;
  std::string run_id;
  std::string artifact_uri;    ///< "mlflow-artifacts:/3/<run>/artifacts", "dbfs:/...", "" when unknown
  std::string status;          ///< RUNNING, FINISHED, ...: "" when the answer had none
  std::string lifecycle_stage; ///< "active" or "deleted": "" when the answer had none
};

/// An error answer of the REST API: `{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "..."}`.
struct ApiError {
  std::string code;
  std::string message;
};

// The longest values MLflow servers accept; longer ones are cut (with a
// marker) rather than losing the whole batch to INVALID_PARAMETER_VALUE.
inline constexpr std::size_t k_max_param_value = 6000;
inline constexpr std::size_t k_max_tag_value = 5000;

// One runs/log-batch request carries at most this much (MLflow's documented limits).
inline constexpr std::size_t k_batch_max_metrics = 1000;
inline constexpr std::size_t k_batch_max_params = 100;
inline constexpr std::size_t k_batch_max_tags = 100;
inline constexpr std::size_t k_batch_max_items = 1000;

/// `<base>/api/2.0/mlflow/<endpoint>`, `base` without a trailing slash
/// ("http://127.0.0.1:5000", "https://host/prefix").
std::string api_url(std::string_view base, std::string_view endpoint);

/// Percent-encodes a query parameter value (RFC 3986 unreserved characters kept).
std::string query_escape(std::string_view text);

/// `value` cut to `limit` bytes (on a UTF-8 boundary), ending in "..." when cut.
std::string truncate_value(std::string_view value, std::size_t limit);

// Request bodies. Each is the JSON text of one REST request, with exactly
// the fields the recorded MLflow 2.17 / 3.6 exchanges use.

/// experiments/create: `{"name", "tags"}`.
std::string create_experiment_body(std::string_view name, const std::vector<KeyValue>& tags);

/// runs/create: `{"experiment_id", "run_name", "start_time", "tags"}`; an empty
/// run name is left out (the server then makes one up).
std::string create_run_body(std::string_view experiment_id, std::string_view run_name,
                            std::int64_t start_time_ms, const std::vector<KeyValue>& tags);

/// runs/log-batch: as many bodies as MLflow's per-request limits need, each
/// `{"run_id", "params"?, "metrics"?, "tags"?}` without empty lists. Values
/// longer than MLflow accepts are truncated. Nothing to log gives no body.
std::vector<std::string> log_batch_bodies(std::string_view run_id, const std::vector<KeyValue>& params,
                                          const std::vector<MetricPoint>& metrics,
                                          const std::vector<KeyValue>& tags);

/// runs/search for the runs of one experiment whose tag `key` is `value`:
/// `{"experiment_ids": [id], "filter": "tags.KEY = 'VALUE'"}`, the fields and
/// filter form of the recorded search by mlflow.parentRunId.
/// `key` and `value` are air-run's own: no quotes or backticks in them.
std::string search_runs_by_tag_body(std::string_view experiment_id, std::string_view key,
                                    std::string_view value);

/// runs/update: `{"run_id", "status", "end_time"}`.
std::string update_run_body(std::string_view run_id, std::string_view status, std::int64_t end_time_ms);

// Response parsers. Errors (system kind) quote what was wrong with the answer.

/// The error object of a non-2xx answer, when the body is one.
std::optional<ApiError> parse_api_error(std::string_view body);

/// experiments/get-by-name: the experiment's id.
Expected<std::string> parse_experiment_lookup(std::string_view body);

/// experiments/create: the new experiment's id.
Expected<std::string> parse_experiment_created(std::string_view body);

/// runs/create and runs/get: the run's ids and artifact URI.
Expected<RunRef> parse_run(std::string_view body);

/// runs/search: the runs found (an answer without "runs" found none).
Expected<std::vector<RunRef>> parse_searched_runs(std::string_view body);

/// The artifact-proxy path for a run's artifact URI: "mlflow-artifacts:/3/r/artifacts"
/// (also "mlflow-artifacts://host:port/3/r/artifacts") -> "3/r/artifacts";
/// nullopt for stores the tracking server does not proxy (dbfs:, s3:, local paths).
std::optional<std::string> proxied_artifact_path(std::string_view artifact_uri);

/// `<base>/api/2.0/mlflow-artifacts/artifacts/<path>/<name>`: where an artifact is PUT.
std::string artifact_url(std::string_view base, std::string_view proxied_path, std::string_view name);

} // namespace air::mlflow
