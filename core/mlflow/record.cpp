// What an MLflow run records about a launch: pure functions of the launch's facts and outcome.
#include "core/mlflow/record.hpp"

#include <fmt/format.h>

#include <cmath>

namespace air::mlflow {

namespace {

// Arguments joined for reading; quoted only when a space or quote would hide the split.
std::string join_arguments(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) {
      if (c == '\'')
        out += "'\\''";
      else
        out += c;
    }
    out += '\'';
  }
  return out;
}

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

} // namespace

std::vector<KeyValue> launch_params(const LaunchFacts& f) {
  std::vector<KeyValue> params;
  params.push_back({"ranks", std::to_string(f.world_size)});
  params.push_back({"accelerator_type", f.accelerator_type});
  params.push_back({"nodes", std::to_string(f.num_nodes)});
  params.push_back({"timeout_s", f.timeout ? std::to_string(f.timeout->count() / 1000) : "none"});
  params.push_back({"target", f.command.empty() ? "" : f.command.front()});
  params.push_back(
      {"args", f.command.size() > 1 ? join_arguments({f.command.begin() + 1, f.command.end()}) : ""});
  params.push_back({"air_run_version", AIR_VERSION});
  params.push_back({"air_run_id", f.air_run_id});
  return params;
}

std::vector<KeyValue> launch_tags(const LaunchFacts& f, const std::string& parent_run_id,
                                  const std::map<std::string, std::string>& user_tags) {
  std::vector<KeyValue> tags;
  if (!parent_run_id.empty()) tags.push_back({"mlflow.parentRunId", parent_run_id});
  if (!f.user.empty()) tags.push_back({"mlflow.user", f.user});
  tags.push_back({"mlflow.source.name", f.command.empty() ? "air-run" : f.command.front()});
  tags.push_back({"mlflow.source.type", "LOCAL"});
  if (f.git_commit) tags.push_back({"mlflow.source.git.commit", *f.git_commit});
  tags.push_back({"air.run_id", f.air_run_id});
  tags.push_back({"air.host", f.host});
  std::string gpus;
  for (std::size_t i = 0; i < f.gpus.size(); ++i) {
    if (!gpus.empty()) gpus += ", ";
    gpus += fmt::format("{}: {} ({})", i, f.gpus[i].name, f.gpus[i].uuid);
  }
  tags.push_back({"air.gpus", gpus.empty() ? "none" : gpus});
  for (const auto& [key, value] : user_tags) {
    bool replaced = false;
    for (auto& t : tags) {
      if (t.key == key) t.value = value, replaced = true;
    }
    if (!replaced) tags.push_back({key, value});
  }
  return tags;
}

std::string final_status(RunOutcome::Status status) {
  switch (status) {
  case RunOutcome::Status::succeeded:
    return "FINISHED";
  case RunOutcome::Status::timed_out:
  case RunOutcome::Status::interrupted:
  case RunOutcome::Status::preempted:
    return "KILLED";
  case RunOutcome::Status::hung:
  case RunOutcome::Status::failed:
  case RunOutcome::Status::launch_failed:
    return "FAILED";
  }
  return "FAILED";
}

std::vector<MetricPoint> final_metrics(const RunOutcome& outcome, int exit_code, bool whole_run,
                                       std::int64_t timestamp_ms) {
  std::vector<MetricPoint> metrics;
  if (whole_run) {
    metrics.push_back({"exit_code", static_cast<double>(exit_code), timestamp_ms, 0});
    metrics.push_back({"duration_s", round3(outcome.duration_s), timestamp_ms, 0});
  }
  for (const RankOutcome& r : outcome.ranks) {
    if (r.status.kind == ExitStatus::Kind::not_exited) continue; // never started
    const std::string prefix = fmt::format("rank_{}/", r.rank);
    metrics.push_back({prefix + "exit_code", static_cast<double>(r.status.shell_code()), timestamp_ms, 0});
    metrics.push_back(
        {prefix + "peak_rss_mb", round3(static_cast<double>(r.max_rss_kb) / 1024.0), timestamp_ms, 0});
  }
  return metrics;
}

std::vector<KeyValue> final_tags(const RunOutcome& outcome, int exit_code) {
  return {{"air.status", std::string(to_string(outcome.status))},
          {"air.exit_code", std::to_string(exit_code)}};
}

} // namespace air::mlflow
