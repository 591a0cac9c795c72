// The launch's MLflow run: created before the ranks, finished after them.
#include "core/mlflow/tracker.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <random>

namespace air::mlflow {

namespace {

std::int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

void say(const std::string& line) { std::fputs((line + "\n").c_str(), stderr); }

/// 128 random bits in hex: the launch's token, found again by runs/search.
std::string random_token() {
  std::random_device device;
  std::string out;
  for (int i = 0; i < 4; ++i) out += fmt::format("{:08x}", device());
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : std::string(separator)) + item;
  return out;
}

} // namespace

Tracker::Tracker(TrackingConfig config, Environment env)
    : config_(std::move(config)), env_(std::move(env)), store_(make_store(config_, env_)) {
  info_.tracking_uri = config_.display_uri;
  info_.parent_run_id = config_.parent_run_id;
}

Expected<std::unique_ptr<Tracker>> Tracker::create(const LaunchSpec& spec, const Environment& env) {
  auto config = resolve_tracking(spec, env);
  if (!config) return config.error();
  if (!*config) return std::unique_ptr<Tracker>();
  return std::unique_ptr<Tracker>(new Tracker(std::move(**config), env));
}

std::string Tracker::where() const {
  return fmt::format("the {} at {}", describe_store(config_.uri, config_.kind), config_.display_uri);
}

std::string Tracker::describe() const {
  std::string experiment =
      !config_.parent_run_id.empty()     ? "its parent's experiment"
      : !config_.experiment_name.empty() ? fmt::format("experiment '{}'", config_.experiment_name)
      : !config_.experiment_id.empty()   ? fmt::format("experiment id {}", config_.experiment_id)
                                         : std::string("the Default experiment");
  std::string out = fmt::format("MLflow: a run '{}' in {} of {}", config_.run_name, experiment, where());
  if (!config_.parent_run_id.empty())
    out += fmt::format(", child of run {} (MLFLOW_RUN_ID)", config_.parent_run_id);
  out += config_.required ? "; required: no run, no launch"
                          : "; if it cannot be created, the launch goes on untracked";
  return out;
}

Status Tracker::start(const LaunchFacts& facts) {
  StartRequest request;
  request.experiment_name = config_.experiment_name;
  request.experiment_id = config_.experiment_id;
  request.parent_run_id = config_.parent_run_id;
  request.run_name = config_.run_name;
  request.start_time_ms = unix_ms(std::chrono::system_clock::now());
  request.tags = launch_tags(facts, config_.parent_run_id, config_.tags);
  request.params = launch_params(facts);
  request.launch_token = random_token();
  request.tags.push_back({k_launch_token_tag, request.launch_token});
  auto started = store_->start(request);
  interrupted_by_ = store_->interrupted_by();
  if (!started) {
    info_.errors.push_back("run not created: " + started.error().message);
    if (interrupted_by_ != 0) return ok_status();
    if (config_.required) {
      return usage_error(
          fmt::format("mlflow.required is true and no MLflow run could be created in {}; nothing "
                      "was launched: {}",
                      where(), started.error().message));
    }
    say(fmt::format("air-run: warning: MLflow: no run could be created in {}; the launch goes on untracked "
                    "(the ranks get no MLFLOW_TRACKING_URI or MLFLOW_RUN_ID): {}",
                    where(), started.error().message));
    return ok_status();
  }
  run_ = started->run;
  info_.parent_run_id = started->parent_run_id;
  for (const auto& w : started->warnings) say("air-run: warning: MLflow: " + w);
  info_.experiment_id = run_.experiment_id;
  info_.run_id = run_.run_id;
  info_.link = run_link(config_, run_.experiment_id, run_.run_id);
  for (const auto& e : started->errors) {
    info_.errors.push_back(e);
    say("air-run: warning: MLflow: " + e);
  }
  say("air-run: " + report_line());
  return ok_status();
}

void Tracker::adopt(const std::string& experiment_id, const std::string& run_id) {
  if (run_id.empty()) {
    info_.errors.push_back("node 0 created no MLflow run");
    return;
  }
  run_ = RunRef{};
  run_.experiment_id = experiment_id;
  run_.run_id = run_id;
  info_.experiment_id = experiment_id;
  info_.run_id = run_id;
  info_.link = run_link(config_, experiment_id, run_id);
}

void Tracker::add_rank_environment(LaunchPlan& plan) const {
  for (RankPlan& rank : plan.ranks) {
    if (!has_run()) {
      // Whatever the caller's environment named (a server that is down, a
      // run that is gone) would only make the ranks' own client wait, then fail.
      for (const char* name : {"MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID"})
        rank.env.erase(name);
      continue;
    }
    if (config_.kind == StoreKind::rest) {
      // The ranks' client prints its URI in every "View run at" line: the
      // credentials go as MLflow's own variables instead.
      rank.env["MLFLOW_TRACKING_URI"] = config_.display_uri;
      if (!config_.basic_user.empty()) {
        rank.env["MLFLOW_TRACKING_USERNAME"] = config_.basic_user;
        rank.env["MLFLOW_TRACKING_PASSWORD"] = config_.basic_password;
      }
    } else {
      rank.env["MLFLOW_TRACKING_URI"] = config_.uri;
    }
    rank.env["MLFLOW_RUN_ID"] = run_.run_id;
    rank.env["MLFLOW_EXPERIMENT_ID"] = run_.experiment_id;
    rank.env.erase("MLFLOW_EXPERIMENT_NAME");
  }
}

void Tracker::finish(const RunOutcome& outcome, int exit_code, bool set_status,
                     const std::function<std::string()>& render_summary) {
  if (!has_run()) return;
  FinishRequest request;
  request.run = run_;
  const std::int64_t end_ms = unix_ms(outcome.ended_at);
  request.metrics = final_metrics(outcome, exit_code, set_status, end_ms);
  if (set_status) {
    request.status = final_status(outcome.status);
    request.end_time_ms = end_ms;
    request.tags = final_tags(outcome, exit_code);
    if (render_summary) request.artifact_name = k_summary_artifact;
    // The copy in the store is rendered as if every step works; the file on
    // disk is rendered afterwards and tells what really happened.
    request.artifact_content = [this, &render_summary, &request] {
      info_.status = request.status;
      info_.artifact = request.artifact_name;
      std::string content = render_summary ? render_summary() : std::string();
      info_.status.clear();
      info_.artifact.clear();
      return content;
    };
  }
  FinishResult result = store_->finish(request);
  interrupted_by_ = store_->interrupted_by();
  info_.status = result.status_set;
  info_.artifact = result.artifact_path;
  for (const auto& e : result.errors) info_.errors.push_back(e);
  if (!result.errors.empty()) say("air-run: warning: MLflow: " + join(result.errors, "; "));
}

void Tracker::abandon(RunOutcome::Status status, int exit_code) {
  RunOutcome outcome;
  outcome.status = status;
  outcome.started_at = outcome.ended_at = std::chrono::system_clock::now();
  finish(outcome, exit_code, true, nullptr);
}

std::string Tracker::report_line() const {
  if (!has_run()) {
    return fmt::format("MLflow: not tracked: {}", info_.errors.empty() ? "no run" : info_.errors.front());
  }
  if (!info_.link.empty()) return "MLflow: View run at " + info_.link;
  return fmt::format("MLflow: run {} in experiment {} of {}", run_.run_id, run_.experiment_id,
                     config_.display_uri);
}

} // namespace air::mlflow
