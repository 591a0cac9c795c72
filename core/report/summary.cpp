#include "core/report/summary.hpp"

#include "core/base/duration.hpp"
#include "core/report/shown_tail.hpp"
#include "core/report/timeline_json.hpp"

#include <cctype>
#include <cmath>

namespace air {
namespace {

using Json = nlohmann::ordered_json;

std::string_view origin_kind(Origin::Kind kind) {
  switch (kind) {
  case Origin::Kind::default_value:
    return "default";
  case Origin::Kind::file:
    return "file";
  case Origin::Kind::env:
    return "env";
  case Origin::Kind::flag:
    return "flag";
  }
  return "default";
}

template <typename T> Json setting(const Setting<T>& s, Json value) {
  Json out;
  out["value"] = std::move(value);
  out["origin"] = origin_kind(s.origin.kind);
  out["where"] = s.origin.where.empty() ? Json(nullptr) : Json(s.origin.where);
  return out;
}

// Seconds rounded to milliseconds, so 12.41 prints as 12.41 and not 12.410000000000002.
double seconds(double s) { return std::round(s * 1000.0) / 1000.0; }
double seconds(Millis ms) { return static_cast<double>(ms.count()) / 1000.0; }

Json string_or_null(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }

Json exit_json(const ExitStatus& status) {
  Json out;
  const bool exited = status.kind == ExitStatus::Kind::exited;
  const bool signaled = status.kind == ExitStatus::Kind::signaled;
  out["code"] = exited ? Json(status.code) : Json(nullptr);
  out["signal"] = signaled ? Json(status.signal) : Json(nullptr);
  out["signal_name"] = signaled ? Json(signal_name(status.signal)) : Json(nullptr);
  out["core_dumped"] = status.core_dumped;
  // Every rank is reaped before the summary, so "not exited" means never started.
  out["description"] = status.kind == ExitStatus::Kind::not_exited ? "not started" : status.describe();
  return out;
}

Json result_json(const RankResult& r) {
  Json out;
  out["state"] = to_string(r.state);
  switch (r.state) {
  case RankResult::State::missing:
    break;
  case RankResult::State::ok:
    out["value"] = r.value;
    break;
  case RankResult::State::invalid:
    out["error"] = r.error;
    out["excerpt"] = r.excerpt;
    break;
  case RankResult::State::too_large:
    out["error"] = r.error;
    out["size_bytes"] = r.size_bytes;
    break;
  }
  return out;
}

Json error_json(const std::optional<RankError>& e) {
  if (!e) return nullptr;
  Json out;
  out["type"] = string_or_null(e->type);
  out["message"] = e->message;
  out["traceback"] = string_or_null(e->traceback);
  out["source"] = to_string(e->source);
  out["timestamp"] = e->timestamp ? Json(*e->timestamp) : Json(nullptr);
  return out;
}

Json remote_json(const std::optional<RemoteFailure>& failure) {
  if (!failure) return nullptr;
  const RemoteFailure& remote = *failure;
  return {{"node_rank", remote.node_rank},
          {"node_name", string_or_null(remote.node_name)},
          {"rank", remote.rank >= 0 ? Json(remote.rank) : Json(nullptr)},
          {"exit_code", remote.exit_code},
          {"reason", remote.reason}};
}

Json rank_json(const RunReport& report, std::size_t i) {
  const RankOutcome& r = report.outcome.ranks[i];
  const RankPlan* plan = find_rank_plan(report.plan, r.rank);
  Json out;
  out["rank"] = r.rank;
  out["local_rank"] = r.local_rank;
  out["pid"] = r.pid > 0 ? Json(r.pid) : Json(nullptr);
  out["gpu"] = plan != nullptr ? string_or_null(plan->gpu_uuid) : Json(nullptr);
  // --numa-binding: "0-7,16-23" and the memory node; null without a binding.
  const bool bound = plan != nullptr && !plan->cpu_affinity.empty();
  out["cpu_affinity"] = bound ? Json(format_rank_list(plan->cpu_affinity)) : Json(nullptr);
  out["numa_node"] = bound && plan->numa_node >= 0 ? Json(plan->numa_node) : Json(nullptr);
  out["exit"] = exit_json(r.status);
  out["stopped_by_air_run"] = r.stopped_by_air_run;
  out["oom_killed"] = r.oom_killed;
  out["spawn_error"] = string_or_null(r.spawn_error);
  out["warm"] = r.warm;
  out["fresh_reason"] = !r.warm && plan != nullptr ? string_or_null(plan->fresh_reason) : Json(nullptr);
  out["end_order"] = r.end_order > 0 ? Json(r.end_order) : Json(nullptr);
  out["duration_s"] = seconds(r.duration_s);
  out["user_s"] = seconds(r.user_s);
  out["sys_s"] = seconds(r.sys_s);
  out["max_rss_kb"] = r.max_rss_kb;
  out["result"] = i < report.results.size() ? result_json(report.results[i]) : result_json(RankResult{});
  out["error"] = i < report.errors.size() ? error_json(report.errors[i]) : Json(nullptr);
  out["log"] = plan != nullptr ? string_or_null(plan->log_file) : Json(nullptr);
  out["log_error"] = string_or_null(r.log_error);
  out["killed"] = r.killed;
  out["last_line"] = r.tail.empty() ? Json(nullptr) : Json(shown_last_line(r.tail));
  out["last_output_age_s"] = r.last_output_age_s >= 0 ? Json(seconds(r.last_output_age_s)) : Json(nullptr);
  out["stack"] = string_or_null(r.stack);
  out["steps"] = r.steps ? Json(*r.steps) : Json(nullptr);
  return out;
}

Json hang_json(const std::optional<HangReport>& hang) {
  if (!hang) return nullptr;
  Json out;
  out["quiet_s"] = seconds(hang->quiet_s);
  out["at"] = format_utc(hang->at);
  out["laggards"] = hang->diagnosis.laggards;
  out["diagnosis"] = hang->diagnosis.line;
  out["ranks"] = Json::array();
  for (const HangRank& r : hang->ranks) {
    Json item;
    item["rank"] = r.rank;
    item["node"] = r.node >= 0 ? Json(r.node) : Json(nullptr);
    item["running"] = r.running;
    item["steps"] = r.counted ? Json(r.steps) : Json(nullptr);
    item["place"] = string_or_null(r.place);
    item["collective"] = r.in_collective ? Json(r.collective) : Json(nullptr);
    item["collective_seq"] = r.counted ? Json(r.collective_seq) : Json(nullptr);
    item["waiting_s"] = r.in_collective ? Json(seconds(r.waiting_s)) : Json(nullptr);
    out["ranks"].push_back(std::move(item));
  }
  out["flight_recorder_files"] = hang->flight_recorder_files;
  return out;
}

Json stragglers_json(const std::vector<Straggler>& stragglers) {
  Json out = Json::array();
  for (const Straggler& s : stragglers) {
    Json item;
    item["rank"] = s.rank;
    item["ms_per_step"] = seconds(s.busy_ms);
    item["others_ms_per_step"] = seconds(s.others_ms);
    item["slower_ms_per_step"] = seconds(s.slower_ms);
    item["gpu"] = string_or_null(s.gpu);
    out.push_back(std::move(item));
  }
  return out;
}

Json preemption_json(const std::optional<PreemptionReport>& p) {
  if (!p) return nullptr;
  Json out;
  out["signal"] = signal_name(p->signal);
  out["stop_step"] = p->stop_step > 0 ? Json(p->stop_step) : Json(nullptr);
  out["asked_ranks"] = p->polling_ranks;
  out["stopped_ranks"] = p->stopped_ranks;
  out["signalled_ranks"] = p->signalled_ranks;
  out["deadline_s"] = seconds(p->deadline_s);
  out["checkpoint"] = string_or_null(p->checkpoint);
  // Across nodes: who picked the step ("job": node 0, for every node; "node":
  // this node alone, the only node or node 0 silent), and the rest of it.
  out["decided_by"] = p->job_wide ? "job" : "node";
  out["signal_node"] = p->job_wide ? Json(p->signal_node) : Json(nullptr);
  out["missing_nodes"] = p->missing_nodes;
  out["fallback"] = p->fallback;
  out["cause"] = string_or_null(p->cause);
  out["requeue"] = string_or_null(p->requeue);
  return out;
}

Json mlflow_json(const mlflow::RunInfo& m) {
  Json out;
  out["tracking_uri"] = m.tracking_uri;
  out["experiment_id"] = string_or_null(m.experiment_id);
  out["run_id"] = string_or_null(m.run_id);
  out["parent_run_id"] = string_or_null(m.parent_run_id);
  out["link"] = string_or_null(m.link);
  out["status"] = string_or_null(m.status);
  out["artifact"] = string_or_null(m.artifact);
  out["tracking"] = m.errors.empty() ? "ok" : "failed";
  out["errors"] = m.errors;
  return out;
}

Json python_env_json(const PreparedEnv& e) {
  Json out;
  out["key"] = e.key;
  out["path"] = e.path;
  out["python"] = e.python;
  out["requirements"] = e.requirements;
  out["cached"] = e.existed;
  out["build_seconds"] = e.existed ? Json(nullptr) : Json(seconds(e.build_seconds));
  out["build_log"] = string_or_null(e.build_log);
  return out;
}

} // namespace

Json spec_settings_json(const LaunchSpec& s) {
  Json env = Json::object();
  for (const auto& [name, value] : s.env.value) env[name] = redact_variable(name, value);
  Json out;
  out["accelerator_type"] = setting(s.accelerator_type, s.accelerator_type.value);
  out["num_accelerators"] =
      setting(s.num_accelerators, s.num_accelerators.value ? Json(*s.num_accelerators.value) : Json(nullptr));
  out["cpu_ranks"] = setting(s.cpu_ranks, s.cpu_ranks.value);
  out["timeout"] = setting(s.timeout, s.timeout.value ? Json(seconds(*s.timeout.value)) : Json(nullptr));
  out["grace_period"] = setting(s.grace_period, seconds(s.grace_period.value));
  out["hang_timeout"] =
      setting(s.hang_timeout, s.hang_timeout.value ? Json(seconds(*s.hang_timeout.value)) : Json(nullptr));
  out["on_hang"] = setting(s.on_hang, s.on_hang.value);
  out["environment.python"] = setting(s.python, s.python.value);
  out["environment.dependencies"] = setting(s.dependencies, s.dependencies.value);
  out["environment.requirements_file"] = setting(s.requirements_file, s.requirements_file.value);
  out["env"] = setting(s.env, std::move(env));
  out["command"] = setting(s.command, s.command.value);
  out["module"] = setting(s.module, s.module.value);
  out["no_python"] = setting(s.no_python, s.no_python.value);
  out["master_addr"] = setting(s.master_addr, s.master_addr.value);
  out["master_port"] = setting(s.master_port, s.master_port.value);
  out["log_dir"] = setting(s.log_dir, s.log_dir.value);
  out["checkpoint_dir"] = setting(s.checkpoint_dir, s.checkpoint_dir.value);
  out["preload"] = setting(s.preload, s.preload.value);
  out["console_ranks"] = setting(s.console_ranks, s.console_ranks.value);
  out["isolate_gpus"] = setting(s.isolate_gpus, s.isolate_gpus.value);
  out["run_id"] = setting(s.run_id, s.run_id.value);
  out["summary_file"] = setting(s.summary_file, s.summary_file.value);
  out["json"] = setting(s.json, s.json.value);
  out["junit_file"] = setting(s.junit_file, s.junit_file.value);
  out["html"] = setting(s.html_file, s.html_file.value);
  out["tail_lines"] = setting(s.tail_lines, s.tail_lines.value);
  out["mlflow.tracking_uri"] = setting(s.mlflow_tracking_uri, without_userinfo(s.mlflow_tracking_uri.value));
  out["mlflow.experiment"] = setting(s.mlflow_experiment, s.mlflow_experiment.value);
  out["mlflow.run_name"] = setting(s.mlflow_run_name, s.mlflow_run_name.value);
  out["mlflow.tags"] = setting(s.mlflow_tags, s.mlflow_tags.value);
  out["mlflow.required"] = setting(s.mlflow_required, s.mlflow_required.value);
  out["mlflow.timeout"] = setting(s.mlflow_timeout, seconds(s.mlflow_timeout.value));
  out["live"] = setting(s.live, s.live.value);
  out["quiet"] = setting(s.quiet, s.quiet.value);
  out["stdin"] = setting(s.stdin_rank, s.stdin_rank.value ? Json(*s.stdin_rank.value) : Json(nullptr));
  out["timestamps"] = setting(s.timestamps, s.timestamps.value);
  return out;
}

Json summary_json(const RunReport& report) {
  const RunOutcome& o = report.outcome;
  const LaunchPlan& plan = report.plan;
  Json doc;
  doc["schema_version"] = k_summary_schema_version;
  doc["air_run_version"] = AIR_VERSION;
  doc["run_id"] = plan.run_id;
  doc["host"] = report.host;
  doc["started_at"] = format_utc(o.started_at);
  doc["ended_at"] = format_utc(o.ended_at);
  doc["duration_s"] = seconds(o.duration_s);

  Json spec;
  spec["path"] = string_or_null(report.spec.spec_path);
  spec["settings"] = report.spec_resolved ? spec_settings_json(report.spec) : Json(nullptr);
  doc["spec"] = std::move(spec);
  const bool refused = report.refusal != nullptr;

  Json hw;
  hw["source"] = report.hardware.source;
  hw["reason"] = string_or_null(report.hardware.reason);
  hw["cuda_visible_devices"] = string_or_null(report.hardware.cuda_visible_devices);
  hw["gpus"] = Json::array();
  for (const GpuInfo& g : report.hardware.gpus) hw["gpus"].push_back(gpu_info_json(g));
  hw["notes"] = report.hardware.notes;
  doc["hardware"] = report.hardware_probed ? std::move(hw) : Json(nullptr);

  Json sel;
  sel["accelerator_type"] = report.selection.accelerator_type;
  sel["cpu"] = report.selection.cpu;
  sel["ranks"] = report.selection.ranks;
  // NVML's index order is not CUDA's: ranks are bound to GPUs by UUID.
  sel["gpu_binding"] = report.selection.cpu ? "none" : "uuid";
  sel["gpus"] = Json::array();
  for (const GpuInfo& g : report.selection.gpus) sel["gpus"].push_back(g.uuid);
  sel["notices"] = report.selection.notices;
  doc["selection"] = refused ? Json(nullptr) : std::move(sel);

  Json launch;
  launch["world_size"] = plan.world_size;
  launch["node_rank"] = plan.node_rank;
  launch["num_nodes"] = plan.num_nodes;
  launch["node_name"] = string_or_null(plan.node_name);
  launch["cluster_source"] = plan.cluster_source;
  launch["master_addr"] = plan.master_addr;
  launch["master_port"] = plan.master_port;
  launch["run_dir"] = plan.run_dir;
  launch["timeout_s"] = plan.timeout ? Json(seconds(*plan.timeout)) : Json(nullptr);
  launch["grace_period_s"] = seconds(plan.grace_period);
  launch["max_restarts"] = plan.max_restarts;
  doc["launch"] = refused ? Json(nullptr) : std::move(launch);

  Json outcome;
  outcome["status"] = to_string(o.status);
  outcome["exit_code"] = report.exit_code;
  outcome["root_cause_rank"] = o.root_cause_rank >= 0 ? Json(o.root_cause_rank) : Json(nullptr);
  outcome["reason"] = o.reason;
  if (refused) {
    Json refusal;
    refusal["kind"] = to_string(report.refusal->kind);
    refusal["message"] = report.refusal->message;
    outcome["refusal"] = std::move(refusal);
  } else {
    outcome["refusal"] = nullptr;
  }
  outcome["interrupt_signal"] = o.interrupt_signal > 0 ? Json(o.interrupt_signal) : Json(nullptr);
  outcome["interrupt_signal_name"] =
      o.interrupt_signal > 0 ? Json(signal_name(o.interrupt_signal)) : Json(nullptr);
  outcome["console_lines_dropped"] = o.console_lines_dropped;
  outcome["remote_failure"] = remote_json(o.remote_failure);
  outcome["restarts"] = o.restarts();
  outcome["attempts"] = Json::array();
  for (const AttemptRecord& a : o.attempts) {
    Json item;
    item["attempt"] = a.attempt;
    item["exit_code"] = a.exit_code;
    item["root_cause_rank"] = a.root_cause_rank >= 0 ? Json(a.root_cause_rank) : Json(nullptr);
    item["reason"] = a.reason;
    item["status"] = a.status;
    item["error"] = string_or_null(a.error);
    item["remote_failure"] = remote_json(a.remote_failure);
    item["master_port"] = a.master_port;
    item["resumed_from"] = string_or_null(a.resumed_from);
    item["nodes"] = a.nodes;
    item["started_at"] = format_utc(a.started_at);
    item["ended_at"] = format_utc(a.ended_at);
    item["duration_s"] = seconds(a.duration_s);
    outcome["attempts"].push_back(std::move(item));
  }
  outcome["hang"] = hang_json(o.hang);
  outcome["preemption"] = preemption_json(o.preemption);
  outcome["checkpoint"] = string_or_null(o.checkpoint);
  doc["outcome"] = std::move(outcome);
  doc["stragglers"] = stragglers_json(o.stragglers);

  doc["ranks"] = Json::array();
  for (std::size_t i = 0; i < o.ranks.size(); ++i) doc["ranks"].push_back(rank_json(report, i));
  doc["mlflow"] = report.mlflow != nullptr ? mlflow_json(*report.mlflow) : Json(nullptr);
  doc["python_env"] = report.python_env != nullptr && report.python_env->active
                          ? python_env_json(*report.python_env)
                          : Json(nullptr);
  // The bounded series the HTML page draws; null for a refused launch.
  doc["timeline"] = refused ? Json(nullptr) : timeline_json(o.timeline, o.started_at);
  return doc;
}

std::string summary_text(const RunReport& report) {
  // replace: rank output and excerpts may hold invalid UTF-8, which dump()
  // would otherwise throw on.
  return summary_json(report).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

} // namespace air
