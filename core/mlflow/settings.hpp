#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/spec/spec.hpp"

#include <map>
#include <optional>
#include <string>

namespace air::mlflow {

/// Gives the mlflow.* keys MLflow's own variables as defaults, below every
/// air-run source (flags > AIR_RUN_* > spec file > these): MLFLOW_TRACKING_URI
/// for mlflow.tracking_uri and MLFLOW_EXPERIMENT_NAME for mlflow.experiment,
/// each with the variable as its origin, so --dry-run shows where it came from.
void apply_standard_variables(LaunchSpec& spec, const Environment& env);

/// How air-run reaches the tracking store.
enum class StoreKind {
  rest,       ///< an MLflow tracking server: http(s)://, REST from air-run itself
  databricks, ///< "databricks" or "databricks://PROFILE": REST to the workspace with a token
  python,     ///< anything else (file:, sqlite:, a plain path...): the mlflow Python package
};

/// The kind of a tracking URI (case-insensitive scheme).
StoreKind store_kind(std::string_view uri);

/// "tracking server", "Databricks workspace", "file store", "SQLite store", ...: for messages.
std::string describe_store(std::string_view uri, StoreKind kind);

/// Everything the tracker needs, resolved once before launch. The token and
/// password are only ever sent in a header, never printed.
struct TrackingConfig {
  std::string uri;         ///< as configured (may hold credentials)
  std::string display_uri; ///< without credentials: what messages, --dry-run and the summary show
  StoreKind kind = StoreKind::rest;
  std::string api_base;        ///< rest/databricks: "https://host[:port][/prefix]" without credentials
  std::string bearer_token;    ///< MLFLOW_TRACKING_TOKEN, or the Databricks token
  std::string basic_user;      ///< MLFLOW_TRACKING_USERNAME, or the URI's user
  std::string basic_password;  ///< MLFLOW_TRACKING_PASSWORD, or the URI's password
  bool insecure_tls = false;   ///< MLFLOW_TRACKING_INSECURE_TLS=true
  std::string ca_file;         ///< MLFLOW_TRACKING_SERVER_CERT_PATH
  std::string experiment_name; ///< "" when not given
  std::string experiment_id;   ///< from MLFLOW_EXPERIMENT_ID when no name is given
  std::string parent_run_id;   ///< MLFLOW_RUN_ID of air-run's caller: the run becomes its child
  std::string run_name;        ///< never empty
  std::map<std::string, std::string> tags; ///< mlflow.tags
  bool required = false;
  Millis timeout{15'000};
  std::string python; ///< interpreter for the python store (environment.python)
};

/// The run's default name: the target's file name ("train.py"), the module
/// for -m, the program's name for executables.
std::string default_run_name(const LaunchSpec& spec);

/// Resolves tracking from the spec (after apply_standard_variables) and the
/// environment; nullopt when no tracking URI is configured, in which case
/// nothing else MLflow-related happens. Errors (usage) name what to set:
/// a Databricks URI without a host or token, an http URI without a host.
Expected<std::optional<TrackingConfig>> resolve_tracking(const LaunchSpec& spec, const Environment& env);

/// The run's page: "<server>/#/experiments/<id>/runs/<run>" for a tracking
/// server, "<workspace>/ml/experiments/<id>/runs/<run>" on Databricks; ""
/// for stores without a web UI of their own (file:, sqlite:).
std::string run_link(const TrackingConfig& config, std::string_view experiment_id, std::string_view run_id);

} // namespace air::mlflow
