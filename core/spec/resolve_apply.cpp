// Assignments onto a LaunchSpec: each key's value goes to its field, with the
// origin it came from. One function a group of keys.
#include "core/spec/resolve_parts.hpp"

#include <algorithm>
#include <set>

namespace air::resolve_parts {
namespace {

// Both return true, so that a key's line can `return put(...)` once it is handled.
template <typename T> bool put(Setting<T>& setting, T value, const Origin& origin) {
  setting.value = std::move(value);
  setting.origin = origin;
  return true;
}

template <typename T>
bool put_list(Setting<std::vector<T>>& setting, std::vector<T> value, const Origin& origin, bool append) {
  if (append) {
    setting.value.insert(setting.value.end(), value.begin(), value.end());
  } else {
    setting.value = std::move(value);
  }
  setting.origin = origin;
  return true;
}

// Ranks as a set: sorted, each once, however often they were given.
bool put_rank_set(Setting<std::vector<int>>& setting, std::vector<int> value, const Origin& origin,
                  bool append) {
  put_list(setting, std::move(value), origin, append);
  auto& ranks = setting.value;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return true;
}

int integer(const Value& v) { return static_cast<int>(std::get<std::int64_t>(v)); }

// Each apply_*_key below sets the field of one key of its group and returns
// true, or returns false for a key of another group. `append` is true when the
// same source already set this key (repeated flags).

// The launch: accelerators, limits, the target, restarts and the warm start.
bool apply_launch_key(LaunchSpec& s, std::string_view k, const Value& v, const Origin& o, bool append) {
  if (k == "accelerator_type") return put(s.accelerator_type, std::get<std::string>(v), o);
  if (k == "num_accelerators") return put(s.num_accelerators, std::optional<int>(integer(v)), o);
  if (k == "cpu_ranks") return put(s.cpu_ranks, integer(v), o);
  if (k == "timeout") return put(s.timeout, std::get<std::optional<Millis>>(v), o);
  if (k == "grace_period") return put(s.grace_period, std::get<Millis>(v), o);
  if (k == "hang_timeout") return put(s.hang_timeout, std::get<std::optional<Millis>>(v), o);
  if (k == "hang_startup") return put(s.hang_startup, std::get<Millis>(v), o);
  if (k == "on_hang") return put(s.on_hang, std::get<std::string>(v), o);
  if (k == "command") return put_list(s.command, std::get<std::vector<std::string>>(v), o, append);
  if (k == "module") return put(s.module, std::get<bool>(v), o);
  if (k == "no_python") return put(s.no_python, std::get<bool>(v), o);
  if (k == "max_restarts") return put(s.max_restarts, integer(v), o);
  if (k == "checkpoint_dir") return put(s.checkpoint_dir, std::get<std::string>(v), o);
  if (k == "preload") return put_list(s.preload, std::get<std::vector<std::string>>(v), o, append);
  return false;
}

// The Python environment and the ranks' variables.
bool apply_environment_key(LaunchSpec& s, std::string_view k, const Value& v, const Origin& o, bool append) {
  if (k == "environment.python") return put(s.python, std::get<std::string>(v), o);
  if (k == "environment.dependencies") {
    if (const auto* path = std::get_if<RequirementsPath>(&v)) {
      put(s.requirements_file, path->path, o);
      return put(s.dependencies, std::vector<std::string>(), o);
    }
    put(s.requirements_file, std::string(), o);
    return put_list(s.dependencies, std::get<std::vector<std::string>>(v), o, append);
  }
  if (k == "environment.find_links")
    return put_list(s.find_links, std::get<std::vector<std::string>>(v), o, append);
  if (k == "environment.index_url") return put(s.index_url, std::get<std::string>(v), o);
  if (k == "environment.no_index") return put(s.no_index, std::get<bool>(v), o);
  if (k == "environment.system_site_packages") return put(s.system_site_packages, std::get<bool>(v), o);
  if (k == "env_cache_dir") return put(s.env_cache_dir, std::get<std::string>(v), o);
  if (k == "rebuild_env") return put(s.rebuild_env, std::get<bool>(v), o);
  if (k == "env") {
    for (const auto& [name, value] : std::get<std::map<std::string, std::string>>(v))
      s.env.value[name] = value;
    s.env.origin = o;
    return true;
  }
  return false;
}

// Nodes and the rendezvous.
bool apply_nodes_key(LaunchSpec& s, std::string_view k, const Value& v, const Origin& o, bool /*append*/) {
  if (k == "master_addr") return put(s.master_addr, std::get<std::string>(v), o);
  if (k == "master_port") return put(s.master_port, integer(v), o);
  if (k == "nnodes") {
    const auto& range = std::get<std::vector<int>>(v);
    put(s.nnodes_min, range.front(), o);
    return put(s.nnodes, range.back(), o);
  }
  if (k == "rdzv_backend") return put(s.rdzv_backend, std::get<std::string>(v), o);
  if (k == "rdzv_endpoint") return put(s.rdzv_endpoint, std::get<std::string>(v), o);
  if (k == "rdzv_id") return put(s.rdzv_id, std::get<std::string>(v), o);
  if (k == "rdzv_conf") return put(s.rdzv_conf, std::get<std::string>(v), o);
  if (k == "standalone") return put(s.standalone, std::get<bool>(v), o);
  if (k == "node_rank") return put(s.node_rank, integer(v), o);
  if (k == "join_timeout") return put(s.join_timeout, std::get<Millis>(v), o);
  if (k == "control_port") return put(s.control_port, integer(v), o);
  return false;
}

// Output, logs and reports.
bool apply_output_key(LaunchSpec& s, std::string_view k, const Value& v, const Origin& o, bool append) {
  if (k == "log_dir") return put(s.log_dir, std::get<std::string>(v), o);
  if (k == "console_ranks") return put_rank_set(s.console_ranks, std::get<std::vector<int>>(v), o, append);
  if (k == "isolate_gpus") return put(s.isolate_gpus, std::get<bool>(v), o);
  if (k == "run_id") return put(s.run_id, std::get<std::string>(v), o);
  if (k == "summary_file") return put(s.summary_file, std::get<std::string>(v), o);
  if (k == "json") return put(s.json, std::get<bool>(v), o);
  if (k == "live") return put(s.live, std::get<bool>(v), o);
  if (k == "quiet") return put(s.quiet, std::get<bool>(v), o);
  if (k == "stdin") return put(s.stdin_rank, std::optional<int>(integer(v)), o);
  if (k == "timestamps") return put(s.timestamps, std::get<bool>(v), o);
  if (k == "junit_file") return put(s.junit_file, std::get<std::string>(v), o);
  if (k == "html") return put(s.html_file, std::get<std::string>(v), o);
  if (k == "tail_lines") return put(s.tail_lines, integer(v), o);
  if (k == "no_prefix") return put(s.no_prefix, std::get<bool>(v), o);
  return false;
}

// MLflow tracking.
bool apply_mlflow_key(LaunchSpec& s, std::string_view k, const Value& v, const Origin& o, bool /*append*/) {
  if (k == "mlflow.tracking_uri") return put(s.mlflow_tracking_uri, std::get<std::string>(v), o);
  if (k == "mlflow.experiment") return put(s.mlflow_experiment, std::get<std::string>(v), o);
  if (k == "mlflow.run_name") return put(s.mlflow_run_name, std::get<std::string>(v), o);
  if (k == "mlflow.tags") {
    for (const auto& [name, value] : std::get<std::map<std::string, std::string>>(v))
      s.mlflow_tags.value[name] = value;
    s.mlflow_tags.origin = o;
    return true;
  }
  if (k == "mlflow.required") return put(s.mlflow_required, std::get<bool>(v), o);
  if (k == "mlflow.timeout") return put(s.mlflow_timeout, std::get<Millis>(v), o);
  return false;
}

// torchrun's own options.
bool apply_torchrun_key(LaunchSpec& s, std::string_view k, const Value& v, const Origin& o, bool append) {
  if (k == "nproc_per_node") return put(s.nproc_per_node, std::get<std::string>(v), o);
  if (k == "role") return put(s.role, std::get<std::string>(v), o);
  if (k == "redirects") return put(s.redirects, std::get<std::string>(v), o);
  if (k == "tee") return put(s.tee, std::get<std::string>(v), o);
  if (k == "numa_binding") return put(s.numa_binding, std::get<std::string>(v), o);
  if (k == "signals_to_handle") return put(s.signals_to_handle, std::get<std::string>(v), o);
  if (k == "duplicate_stdout_filters") return put(s.duplicate_stdout_filters, std::get<std::string>(v), o);
  if (k == "duplicate_stderr_filters") return put(s.duplicate_stderr_filters, std::get<std::string>(v), o);
  if (k == "virtual_local_rank") return put(s.virtual_local_rank, std::get<bool>(v), o);
  if (k == "local_ranks_filter")
    return put_rank_set(s.local_ranks_filter, std::get<std::vector<int>>(v), o, append);
  return false;
}

} // namespace

void apply_all(LaunchSpec& spec, const std::vector<Assignment>& assignments) {
  std::set<std::string_view> touched;
  for (const Assignment& a : assignments) {
    const bool append = !touched.insert(a.key->key).second;
    // Every key of the table is in exactly one group.
    for (const auto group : {apply_launch_key, apply_environment_key, apply_nodes_key, apply_output_key,
                             apply_mlflow_key, apply_torchrun_key}) {
      if (group(spec, a.key->key, a.value, a.origin, append)) break;
    }
  }
}

} // namespace air::resolve_parts
