// The launch's MLflow run: created before the ranks, finished after them.
#include "core/mlflow/tracker.hpp"

#include "core/base/speaker.hpp"
#include "core/mlflow/retry.hpp"
#include "core/os/host.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <random>

namespace air::mlflow {

namespace {

std::int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

void say(const std::string& line) { say_on_stderr(line + "\n"); }

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

/// The run's file's name, for Python ranks that start before the run exists.
constexpr const char* k_run_file_name = "mlflow-run";

/// Writes `content` to a temporary file renamed to `path`: a reader sees no
/// file or all of it. Not fsync'ed (write_file_atomically is): ranks wait on
/// it, a sync on a busy disk would add to their wait, and it lives only as
/// long as the run.
Status write_then_rename(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "we");
  if (f == nullptr) return sys_error("cannot write " + tmp, errno);
  const bool written = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  const int write_errno = errno;
  if (std::fclose(f) != 0 || !written) {
    std::remove(tmp.c_str());
    return sys_error("cannot write " + tmp, written ? errno : write_errno);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(tmp.c_str());
    return sys_error("cannot rename " + tmp, rename_errno);
  }
  return ok_status();
}

} // namespace

RankVariables rank_variables(const TrackingConfig& config, const RunRef* run) {
  RankVariables out;
  if (run == nullptr) {
    // Whatever the caller's environment named (a server that is down, a run
    // that is gone) would only make the ranks' own client wait, then fail.
    out.unset = {"MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID"};
    return out;
  }
  if (config.kind == StoreKind::rest) {
    // The ranks' client prints its URI in every "View run at" line: the
    // credentials go as MLflow's own variables instead.
    out.set["MLFLOW_TRACKING_URI"] = config.display_uri;
    if (!config.basic_user.empty()) {
      out.set["MLFLOW_TRACKING_USERNAME"] = config.basic_user;
      out.set["MLFLOW_TRACKING_PASSWORD"] = config.basic_password;
    }
  } else {
    out.set["MLFLOW_TRACKING_URI"] = config.uri;
  }
  out.set["MLFLOW_RUN_ID"] = run->run_id;
  out.set["MLFLOW_EXPERIMENT_ID"] = run->experiment_id;
  out.unset = {"MLFLOW_EXPERIMENT_NAME"};
  return out;
}

std::string rank_variables_file(const RankVariables& vars) {
  std::string out;
  for (const auto& name : vars.unset) out += name + '\0';
  for (const auto& [name, value] : vars.set) out += name + "=" + value + '\0';
  return out;
}

Tracker::Tracker(TrackingConfig config, Environment env)
    : config_(std::move(config)), env_(std::move(env)), store_(make_store(config_, env_)) {
  info_.tracking_uri = config_.display_uri;
  info_.parent_run_id = config_.parent_run_id;
}

Tracker::~Tracker() {
  stop_ = true; // a launch that ends before settling: the retries stop at once
  if (creating_.joinable()) creating_.join();
  if (!run_file_dir_.empty()) remove_tree(run_file_dir_);
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

void Tracker::begin(const LaunchFacts& facts, bool in_background) {
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
  if (!in_background || !store_->starts_in_background()) {
    auto started = store_->start(request, nullptr);
    interrupted_by_ = store_->interrupted_by();
    record_start(std::move(started), interrupted_by_ != 0);
    return;
  }
  store_->prepare();
  done_ = false; // no other thread yet
  creating_ = std::thread([this, request = std::move(request)] {
    auto started = store_->start(request, &stop_);
    record_start(std::move(started), stop_.load());
    publish();
  });
}

Status Tracker::settle() {
  if (creating_.joinable()) {
    std::unique_lock<std::mutex> lock(mutex_);
    // Woken by publish() the moment the creation is over. Ctrl-C (blocked,
    // so pending) is looked for every 10 ms on this, the main thread: the
    // creation's thread takes no signal. It stops the creation's retries.
    while (!done_) {
      if (interrupt_pending()) {
        interrupted_by_ = wait_for_interrupt(std::chrono::milliseconds(0));
        stop_ = true;
        break;
      }
      over_.wait_for(lock, std::chrono::milliseconds(10));
    }
    lock.unlock();
    creating_.join();
  }
  return start_status_;
}

bool Tracker::ranks_can_wait(const LaunchPlan& plan) {
  // The shim is there for Python ranks started by air-run itself; --preload's
  // ranks are forked from an interpreter that ran it before they existed.
  // Restarts get the run in their environment: it exists by then.
  const bool first_forks = !plan.preload.empty() && plan.preload_first_attempt;
  return !plan.stack_shim_dir.empty() && !first_forks && !plan.run_dir.empty();
}

void Tracker::record_start(Expected<Started> started, bool stopped) {
  if (!started) {
    info_.errors.push_back("run not created: " + started.error().message);
    if (stopped) return;
    if (config_.required) {
      start_status_ =
          usage_error(fmt::format("mlflow.required is true and no MLflow run could be created in {}; nothing "
                                  "was launched: {}",
                                  where(), started.error().message));
      return;
    }
    say(fmt::format("air-run: warning: MLflow: no run could be created in {}; the launch goes on untracked "
                    "(the ranks get no MLFLOW_TRACKING_URI or MLFLOW_RUN_ID): {}",
                    where(), started.error().message));
    return;
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
}

void Tracker::publish() {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = true;
  over_.notify_all();
  if (run_file_.empty()) return;
  if (auto written = write_then_rename(run_file_, rank_variables_file(current_variables())); !written) {
    info_.errors.push_back("the run could not be handed to the Python ranks: " + written.error().message);
    say("air-run: warning: MLflow: " + info_.errors.back());
  }
}

RankVariables Tracker::current_variables() const {
  return rank_variables(config_, has_run() ? &run_ : nullptr);
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

void Tracker::add_rank_environment(LaunchPlan& plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool waiting = !done_ && ranks_can_wait(plan);
  // Not yet created: the ranks start without a run (and so with none of the
  // caller's), and the shim applies the file once air-run has written it.
  const RankVariables vars = done_ ? current_variables() : rank_variables(config_, nullptr);
  if (waiting && run_file_.empty()) {
    // A folder of its own under $TMPDIR, on this node's disk like the ranks
    // that poll it: the run's folder may be a kept log folder on a shared
    // file system, whose cached lookups could hide the new file for seconds.
    if (auto dir = make_private_run_dir(env_, plan.run_id + "-mlflow")) {
      run_file_dir_ = *dir;
      run_file_ = run_file_dir_ + "/" + k_run_file_name;
    } else {
      run_file_ = plan.run_dir + "/" + k_run_file_name;
      std::remove(run_file_.c_str()); // a reused log folder's, from an earlier run
    }
  }
  // As long as the creation can take: its retries, the last attempt, loading libcurl.
  const auto wait_s = std::chrono::duration<double>(config_.timeout).count() + 5.0;
  for (RankPlan& rank : plan.ranks) {
    for (const auto& name : vars.unset) rank.env.erase(name);
    for (const auto& [name, value] : vars.set) rank.env[name] = value;
    if (!waiting) continue;
    rank.env[k_run_file_var] = run_file_;
    rank.env[k_run_wait_var] = fmt::format("{:.1f}", wait_s);
  }
}

void Tracker::finish(const RunOutcome& outcome, int exit_code, bool set_status,
                     const std::function<std::string()>& render_summary,
                     const std::function<std::string()>& render_page) {
  // A creation still going on ends here: at once when the run was
  // interrupted, else when it is over (its own retry budget bounds it).
  if (outcome.status == RunOutcome::Status::interrupted) stop_ = true;
  settle();
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
    // Drawn after the summary (by the caller, from the same summary), sent beside it.
    if (render_summary && render_page)
      request.more_artifacts.push_back({k_page_artifact, "text/html; charset=utf-8", render_page});
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
