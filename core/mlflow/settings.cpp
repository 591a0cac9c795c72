// Where tracking goes and with what credentials, from the spec and the environment.
#include "core/mlflow/settings.hpp"

#include "core/base/text.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

namespace air::mlflow {

namespace {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      const int hi = hex(s[i + 1]);
      const int lo = hex(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

bool truthy(std::string_view value) {
  const std::string v = lower(value);
  return v == "true" || v == "1" || v == "yes";
}

/// One section of ~/.databrickscfg (INI): its host and token.
struct DatabricksProfile {
  std::string host;
  std::string token;
};

std::optional<DatabricksProfile> read_databricks_profile(const std::string& path, const std::string& name) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string section;
  DatabricksProfile profile;
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    const std::string t(trim(line));
    if (t.empty() || t[0] == '#' || t[0] == ';') continue;
    if (t.front() == '[' && t.back() == ']') {
      section = std::string(trim(std::string_view(t).substr(1, t.size() - 2)));
      continue;
    }
    if (section != name) continue;
    const auto eq = t.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = lower(trim(std::string_view(t).substr(0, eq)));
    const std::string value(trim(std::string_view(t).substr(eq + 1)));
    if (key == "host") profile.host = value, found = true;
    if (key == "token") profile.token = value, found = true;
  }
  if (!found) return std::nullopt;
  return profile;
}

std::string strip_trailing_slashes(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

Status resolve_databricks(TrackingConfig& c, const Environment& env) {
  // "databricks" or "databricks://PROFILE"; the variables win over the profile file, as in MLflow.
  std::string profile_name = "DEFAULT";
  if (starts_with(c.uri, "databricks://")) {
    profile_name = c.uri.substr(std::string_view("databricks://").size());
    const auto colon = profile_name.find(':'); // "profile:prefix" (a secret scope) is not supported
    if (colon != std::string::npos) profile_name.resize(colon);
    if (profile_name.empty()) profile_name = "DEFAULT";
  }
  std::string host = env_or(env, "DATABRICKS_HOST");
  std::string token = env_or(env, "DATABRICKS_TOKEN");
  const std::string config_file =
      env_or(env, "DATABRICKS_CONFIG_FILE", env_or(env, "HOME", "/nonexistent") + "/.databrickscfg");
  if (host.empty() || token.empty()) {
    if (auto profile = read_databricks_profile(config_file, profile_name)) {
      if (host.empty()) host = profile->host;
      if (token.empty()) token = profile->token;
    }
  }
  if (host.empty() || token.empty()) {
    return usage_error(fmt::format(
        "mlflow.tracking_uri {}: set DATABRICKS_HOST and DATABRICKS_TOKEN (a personal access token), or "
        "give them in profile [{}] of {}",
        c.display_uri, profile_name, config_file));
  }
  if (!starts_with(host, "https://") && !starts_with(host, "http://")) host = "https://" + host;
  c.api_base = strip_trailing_slashes(host);
  c.bearer_token = token;
  return ok_status();
}

Status resolve_http(TrackingConfig& c, const Environment& env) {
  const std::size_t scheme_end = c.uri.find("://");
  const std::size_t host_start = scheme_end + 3;
  const std::size_t authority_end = std::min(c.uri.find_first_of("/?#", host_start), c.uri.size());
  const std::string authority = c.uri.substr(host_start, authority_end - host_start);
  const std::size_t at = authority.rfind('@');
  const std::string host = at == std::string::npos ? authority : authority.substr(at + 1);
  if (host.empty() || host.front() == ':')
    return usage_error(fmt::format("mlflow.tracking_uri {}: no host in the URI", c.display_uri));
  if (at != std::string::npos) {
    const std::string userinfo = authority.substr(0, at);
    const std::size_t colon = userinfo.find(':');
    c.basic_user = percent_decode(userinfo.substr(0, colon));
    if (colon != std::string::npos) c.basic_password = percent_decode(userinfo.substr(colon + 1));
  }
  std::string path = c.uri.substr(authority_end);
  path = path.substr(0, path.find_first_of("?#"));
  c.api_base = strip_trailing_slashes(c.uri.substr(0, host_start) + host + path);
  // MLflow's own client variables, so one environment serves both.
  if (const auto user = env_or(env, "MLFLOW_TRACKING_USERNAME"); !user.empty()) c.basic_user = user;
  if (const auto password = env_or(env, "MLFLOW_TRACKING_PASSWORD"); !password.empty())
    c.basic_password = password;
  c.bearer_token = env_or(env, "MLFLOW_TRACKING_TOKEN");
  return ok_status();
}

} // namespace

void apply_standard_variables(LaunchSpec& spec, const Environment& env) {
  const auto use = [&env](Setting<std::string>& setting, const char* variable) {
    if (!setting.is_default()) return;
    const std::string value = env_or(env, variable);
    if (value.empty()) return;
    setting.value = value;
    setting.origin = Origin{Origin::Kind::env, variable};
  };
  use(spec.mlflow_tracking_uri, "MLFLOW_TRACKING_URI");
  use(spec.mlflow_experiment, "MLFLOW_EXPERIMENT_NAME");
}

StoreKind store_kind(std::string_view uri) {
  const std::string l = lower(uri);
  if (starts_with(l, "http://") || starts_with(l, "https://")) return StoreKind::rest;
  if (l == "databricks" || starts_with(l, "databricks://")) return StoreKind::databricks;
  return StoreKind::python;
}

std::string describe_store(std::string_view uri, StoreKind kind) {
  if (kind == StoreKind::rest) return "tracking server";
  if (kind == StoreKind::databricks) return "Databricks workspace";
  const std::string l = lower(uri);
  if (starts_with(l, "file:") || l.find(':') == std::string::npos) return "file store";
  if (starts_with(l, "sqlite:")) return "SQLite store";
  const auto colon = l.find(':');
  return l.substr(0, colon) + " store";
}

std::string default_run_name(const LaunchSpec& spec) {
  const auto& command = spec.command.value;
  if (command.empty()) return "air-run";
  if (spec.module.value) return command.front();
  const std::string name = std::filesystem::path(command.front()).filename().string();
  return name.empty() ? command.front() : name;
}

Expected<std::optional<TrackingConfig>> resolve_tracking(const LaunchSpec& spec, const Environment& env) {
  const std::string uri(trim(spec.mlflow_tracking_uri.value));
  if (uri.empty() || lower(uri) == "none") return std::optional<TrackingConfig>();
  TrackingConfig c;
  c.uri = uri;
  c.display_uri = without_userinfo(uri);
  c.kind = store_kind(uri);
  if (c.kind == StoreKind::rest) AIR_TRY(resolve_http(c, env));
  if (c.kind == StoreKind::databricks) AIR_TRY(resolve_databricks(c, env));
  c.insecure_tls = truthy(env_or(env, "MLFLOW_TRACKING_INSECURE_TLS"));
  c.ca_file = env_or(env, "MLFLOW_TRACKING_SERVER_CERT_PATH");
  c.experiment_name = spec.mlflow_experiment.value;
  if (c.experiment_name.empty()) c.experiment_id = env_or(env, "MLFLOW_EXPERIMENT_ID");
  c.parent_run_id = env_or(env, "MLFLOW_RUN_ID");
  c.run_name = spec.mlflow_run_name.value.empty() ? default_run_name(spec) : spec.mlflow_run_name.value;
  c.tags = spec.mlflow_tags.value;
  c.required = spec.mlflow_required.value;
  c.timeout = spec.mlflow_timeout.value;
  c.python = spec.python.value;
  if (c.kind == StoreKind::databricks && c.experiment_name.empty() && c.experiment_id.empty() &&
      c.parent_run_id.empty()) {
    return usage_error(fmt::format(
        "mlflow.tracking_uri {}: Databricks needs an experiment: set mlflow.experiment to a workspace path "
        "like /Users/you@example.com/my-experiment (or MLFLOW_EXPERIMENT_NAME / MLFLOW_EXPERIMENT_ID)",
        c.display_uri));
  }
  return std::optional<TrackingConfig>(std::move(c));
}

std::string run_link(const TrackingConfig& config, std::string_view experiment_id, std::string_view run_id) {
  if (experiment_id.empty() || run_id.empty()) return "";
  if (config.kind == StoreKind::rest)
    return fmt::format("{}/#/experiments/{}/runs/{}", config.api_base, experiment_id, run_id);
  if (config.kind == StoreKind::databricks)
    return fmt::format("{}/ml/experiments/{}/runs/{}", config.api_base, experiment_id, run_id);
  return "";
}

} // namespace air::mlflow
