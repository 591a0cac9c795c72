// --dry-run's view of a spec: every key's value as it may be shown (secrets
// redacted) and where it came from. One function a group of keys.
#include "core/base/redact.hpp"
#include "core/spec/spec.hpp"

#include <algorithm>
#include <utility>

namespace air {
namespace {

/// A key's shown value and its origin; `found` is false for a key of another group.
struct Shown {
  std::string value;
  Origin origin;
  bool found = true;
};

const Shown k_other_group{"", {}, false};

std::string show_string(const std::string& s) { return s.empty() ? "\"\"" : s; }

std::string show_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

std::string show_bool(bool b) { return b ? "true" : "false"; }

// Each show_*_key below gives the value of one key of its group, or
// k_other_group for a key of another group.

// The launch: accelerators, limits, the target, restarts and the warm start.
Shown show_launch_key(const LaunchSpec& s, std::string_view k) {
  if (k == "accelerator_type") {
    return {s.accelerator_type.value.empty() ? "auto" : s.accelerator_type.value, s.accelerator_type.origin};
  }
  if (k == "num_accelerators") {
    const auto& n = s.num_accelerators.value;
    return {n ? std::to_string(*n) : "auto", s.num_accelerators.origin};
  }
  if (k == "cpu_ranks") return {std::to_string(s.cpu_ranks.value), s.cpu_ranks.origin};
  if (k == "timeout") {
    return {s.timeout.value ? format_duration(*s.timeout.value) : "none", s.timeout.origin};
  }
  if (k == "grace_period") return {format_duration(s.grace_period.value), s.grace_period.origin};
  if (k == "hang_startup") return {format_duration(s.hang_startup.value), s.hang_startup.origin};
  if (k == "hang_timeout") {
    return {s.hang_timeout.value ? format_duration(*s.hang_timeout.value) : "none", s.hang_timeout.origin};
  }
  if (k == "on_hang") return {s.on_hang.value, s.on_hang.origin};
  if (k == "command") return {show_list(s.command.value), s.command.origin};
  if (k == "module") return {show_bool(s.module.value), s.module.origin};
  if (k == "no_python") return {show_bool(s.no_python.value), s.no_python.origin};
  if (k == "max_restarts") return {std::to_string(s.max_restarts.value), s.max_restarts.origin};
  if (k == "checkpoint_dir") return {show_string(s.checkpoint_dir.value), s.checkpoint_dir.origin};
  if (k == "preload") return {show_list(s.preload.value), s.preload.origin};
  return k_other_group;
}

// The Python environment and the ranks' variables (secrets redacted).
Shown show_environment_key(const LaunchSpec& s, std::string_view k) {
  if (k == "environment.python") return {show_string(s.python.value), s.python.origin};
  if (k == "environment.dependencies") {
    if (!s.requirements_file.value.empty())
      return {"-r " + s.requirements_file.value, s.requirements_file.origin};
    return {show_list(s.dependencies.value), s.dependencies.origin};
  }
  if (k == "environment.find_links") {
    std::vector<std::string> links;
    for (const auto& link : s.find_links.value) links.push_back(redact_urls(link));
    return {show_list(links), s.find_links.origin};
  }
  if (k == "environment.index_url") return {show_string(redact_urls(s.index_url.value)), s.index_url.origin};
  if (k == "environment.no_index") return {show_bool(s.no_index.value), s.no_index.origin};
  if (k == "environment.system_site_packages") {
    return {show_bool(s.system_site_packages.value), s.system_site_packages.origin};
  }
  if (k == "env_cache_dir") {
    return {s.env_cache_dir.value.empty() ? "default" : s.env_cache_dir.value, s.env_cache_dir.origin};
  }
  if (k == "rebuild_env") return {show_bool(s.rebuild_env.value), s.rebuild_env.origin};
  if (k == "env") {
    std::string out = "{";
    for (const auto& [name, value] : s.env.value)
      out += (out.size() > 1 ? ", " : "") + name + "=" + redact_variable(name, value);
    return {out + "}", s.env.origin};
  }
  return k_other_group;
}

// Nodes and the rendezvous.
Shown show_nodes_key(const LaunchSpec& s, std::string_view k) {
  if (k == "master_addr") return {show_string(s.master_addr.value), s.master_addr.origin};
  if (k == "master_port") return {std::to_string(s.master_port.value), s.master_port.origin};
  if (k == "nnodes") {
    const std::string max = std::to_string(s.nnodes.value);
    return {s.nnodes_min.value == s.nnodes.value ? max : std::to_string(s.nnodes_min.value) + ":" + max,
            s.nnodes.origin};
  }
  if (k == "rdzv_backend") return {s.rdzv_backend.value, s.rdzv_backend.origin};
  if (k == "rdzv_endpoint") return {show_string(s.rdzv_endpoint.value), s.rdzv_endpoint.origin};
  if (k == "rdzv_id") return {show_string(s.rdzv_id.value), s.rdzv_id.origin};
  if (k == "rdzv_conf") return {show_string(s.rdzv_conf.value), s.rdzv_conf.origin};
  if (k == "standalone") return {show_bool(s.standalone.value), s.standalone.origin};
  if (k == "node_rank") return {std::to_string(s.node_rank.value), s.node_rank.origin};
  if (k == "join_timeout") return {format_duration(s.join_timeout.value), s.join_timeout.origin};
  if (k == "control_port") return {std::to_string(s.control_port.value), s.control_port.origin};
  return k_other_group;
}

// Output, logs and reports.
Shown show_output_key(const LaunchSpec& s, std::string_view k) {
  if (k == "log_dir") return {show_string(s.log_dir.value), s.log_dir.origin};
  if (k == "console_ranks") {
    return {s.console_ranks.value.empty() ? "all" : format_rank_list(s.console_ranks.value),
            s.console_ranks.origin};
  }
  if (k == "isolate_gpus") return {show_bool(s.isolate_gpus.value), s.isolate_gpus.origin};
  if (k == "run_id") return {show_string(s.run_id.value), s.run_id.origin};
  if (k == "summary_file") return {show_string(s.summary_file.value), s.summary_file.origin};
  if (k == "html") return {show_string(s.html_file.value), s.html_file.origin};
  if (k == "json") return {show_bool(s.json.value), s.json.origin};
  if (k == "live") return {show_bool(s.live.value), s.live.origin};
  if (k == "quiet") return {show_bool(s.quiet.value), s.quiet.origin};
  if (k == "stdin") {
    const auto& n = s.stdin_rank.value;
    return {n ? std::to_string(*n) : "auto", s.stdin_rank.origin};
  }
  if (k == "timestamps") return {show_bool(s.timestamps.value), s.timestamps.origin};
  if (k == "junit_file") return {show_string(s.junit_file.value), s.junit_file.origin};
  if (k == "tail_lines") return {std::to_string(s.tail_lines.value), s.tail_lines.origin};
  if (k == "no_prefix") return {show_bool(s.no_prefix.value), s.no_prefix.origin};
  return k_other_group;
}

// MLflow tracking (the URI without credentials).
Shown show_mlflow_key(const LaunchSpec& s, std::string_view k) {
  if (k == "mlflow.tracking_uri") {
    const std::string& uri = s.mlflow_tracking_uri.value;
    return {uri.empty() ? "none" : without_userinfo(uri), s.mlflow_tracking_uri.origin};
  }
  if (k == "mlflow.experiment") {
    return {s.mlflow_experiment.value.empty() ? "default" : s.mlflow_experiment.value,
            s.mlflow_experiment.origin};
  }
  if (k == "mlflow.run_name") {
    return {s.mlflow_run_name.value.empty() ? "default" : s.mlflow_run_name.value, s.mlflow_run_name.origin};
  }
  if (k == "mlflow.tags") {
    std::string out = "{";
    for (const auto& [name, value] : s.mlflow_tags.value)
      out += (out.size() > 1 ? ", " : "") + name + "=" + value;
    return {out + "}", s.mlflow_tags.origin};
  }
  if (k == "mlflow.required") return {show_bool(s.mlflow_required.value), s.mlflow_required.origin};
  if (k == "mlflow.timeout") return {format_duration(s.mlflow_timeout.value), s.mlflow_timeout.origin};
  return k_other_group;
}

// torchrun's own options.
Shown show_torchrun_key(const LaunchSpec& s, std::string_view k) {
  if (k == "nproc_per_node") {
    return {s.nproc_per_node.value.empty() ? "none" : s.nproc_per_node.value, s.nproc_per_node.origin};
  }
  if (k == "role") return {show_string(s.role.value), s.role.origin};
  if (k == "redirects") return {show_string(s.redirects.value), s.redirects.origin};
  if (k == "tee") return {show_string(s.tee.value), s.tee.origin};
  if (k == "numa_binding") return {s.numa_binding.value, s.numa_binding.origin};
  if (k == "signals_to_handle") {
    return {s.signals_to_handle.value.empty() ? "default" : s.signals_to_handle.value,
            s.signals_to_handle.origin};
  }
  if (k == "duplicate_stdout_filters") {
    return {s.duplicate_stdout_filters.value.empty() ? "none" : s.duplicate_stdout_filters.value,
            s.duplicate_stdout_filters.origin};
  }
  if (k == "duplicate_stderr_filters") {
    return {s.duplicate_stderr_filters.value.empty() ? "none" : s.duplicate_stderr_filters.value,
            s.duplicate_stderr_filters.origin};
  }
  if (k == "virtual_local_rank") return {show_bool(s.virtual_local_rank.value), s.virtual_local_rank.origin};
  if (k == "local_ranks_filter") {
    return {s.local_ranks_filter.value.empty() ? "all" : format_rank_list(s.local_ranks_filter.value),
            s.local_ranks_filter.origin};
  }
  return k_other_group;
}

// The shown value and origin of one key.
std::pair<std::string, Origin> show(const LaunchSpec& s, std::string_view k) {
  for (const auto group : {show_launch_key, show_environment_key, show_nodes_key, show_output_key,
                           show_mlflow_key, show_torchrun_key}) {
    if (auto shown = group(s, k); shown.found) return {std::move(shown.value), std::move(shown.origin)};
  }
  return {"?", Origin{}};
}

} // namespace

std::string Origin::describe() const {
  switch (kind) {
  case Kind::default_value:
    return where.empty() ? "default" : "default, " + where;
  case Kind::file:
    return where;
  case Kind::env:
    return "env " + where;
  case Kind::flag:
    return where.empty() ? "command line" : "flag " + where;
  }
  return "default";
}

std::string without_userinfo(std::string_view uri) {
  const std::size_t scheme = uri.find("://");
  if (scheme == std::string_view::npos) return std::string(uri);
  const std::size_t host = scheme + 3;
  const std::size_t end = std::min(uri.find_first_of("/?#", host), uri.size());
  const std::size_t at = uri.substr(0, end).rfind('@');
  if (at == std::string_view::npos || at < host) return std::string(uri);
  return std::string(uri.substr(0, host)) + std::string(uri.substr(at + 1));
}

std::vector<std::string> describe_spec(const LaunchSpec& spec) {
  std::vector<std::string> lines;
  for (const SpecKey& row : spec_keys()) {
    const auto [value, origin] = show(spec, row.key);
    lines.push_back(std::string(row.key) + " = " + value + "  (" + origin.describe() + ")");
  }
  return lines;
}

} // namespace air
