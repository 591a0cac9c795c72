// The Python store: tracking URIs that only the mlflow package itself can
// write (file:, sqlite:, a plain path, database and plugin stores), through
// `python -m air._mlflow_store` run with the configured interpreter.
#include "core/mlflow/store.hpp"
#include "core/os/atomic_file.hpp"
#include "core/os/capture.hpp"
#include "core/os/host.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>

namespace air::mlflow {

namespace {

using Json = nlohmann::ordered_json;

// The helper's exit code when `import mlflow` fails.
constexpr int k_exit_no_mlflow = 3;

Json key_values(const std::vector<KeyValue>& items) {
  Json out = Json::array();
  for (const auto& kv : items) out.push_back({{"key", kv.key}, {"value", kv.value}});
  return out;
}

/// A private directory for the request and artifact files, removed on scope exit.
class ScratchDir {
public:
  explicit ScratchDir(const Environment& env) {
    std::string pattern = env_or(env, "TMPDIR", "/tmp") + "/air-mlflow-XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    if (!path_.empty()) remove_tree(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

class PythonStore final : public Store {
public:
  PythonStore(TrackingConfig config, Environment env) : config_(std::move(config)), env_(std::move(env)) {
    const std::string package_dir = find_python_package_dir(env_);
    if (!package_dir.empty()) {
      const std::string old = env_or(env_, "PYTHONPATH");
      env_["PYTHONPATH"] = old.empty() ? package_dir : package_dir + ":" + old;
    }
  }

  Expected<Started> start(const StartRequest& request, const std::atomic<bool>* /*stop*/) override {
    Json j;
    j["tracking_uri"] = config_.uri;
    j["experiment_name"] = request.experiment_name;
    j["experiment_id"] = request.experiment_id;
    j["parent_run_id"] = request.parent_run_id;
    j["run_name"] = request.run_name;
    j["start_time"] = request.start_time_ms;
    j["tags"] = key_values(request.tags);
    j["params"] = key_values(request.params);
    auto answer = run_helper("start", j, {});
    if (!answer) return answer.error();
    Started started;
    started.run.experiment_id = answer->value("experiment_id", "");
    started.run.run_id = answer->value("run_id", "");
    started.run.artifact_uri = answer->value("artifact_uri", "");
    if (started.run.run_id.empty())
      return Error{ErrorKind::system, "air._mlflow_store start: no run_id in its answer"};
    started.parent_run_id = answer->value("parent_run_id", "");
    for (const auto& w : answer->value("warnings", Json::array()))
      started.warnings.push_back(w.get<std::string>());
    for (const auto& e : answer->value("errors", Json::array()))
      started.errors.push_back(e.get<std::string>());
    return started;
  }

  FinishResult finish(const FinishRequest& request) override {
    FinishResult result;
    Json j;
    j["tracking_uri"] = config_.uri;
    j["run_id"] = request.run.run_id;
    j["status"] = request.status;
    j["end_time"] = request.end_time_ms;
    Json metrics = Json::array();
    for (const auto& m : request.metrics)
      metrics.push_back({{"key", m.key}, {"value", m.value}, {"timestamp", m.timestamp}, {"step", m.step}});
    j["metrics"] = std::move(metrics);
    j["tags"] = key_values(request.tags);
    std::string artifact;
    if (!request.artifact_name.empty() && request.artifact_content) artifact = request.artifact_content();
    auto answer =
        run_helper("finish", j, request.artifact_name.empty() ? "" : request.artifact_name, artifact);
    if (!answer) {
      result.errors.push_back(answer.error().message);
      return result;
    }
    result.status_set = answer->value("status_set", "");
    result.artifact_path = answer->value("artifact_path", "");
    for (const auto& e : answer->value("errors", Json::array()))
      result.errors.push_back(e.get<std::string>());
    return result;
  }

  int interrupted_by() const override { return 0; }
  bool starts_in_background() const override { return false; }

private:
  /// Runs the helper with the request in a file; its last stdout line is the answer.
  Expected<Json> run_helper(const char* action, Json request, const std::string& artifact_name,
                            const std::string& artifact = "") {
    ScratchDir scratch(env_);
    if (scratch.path().empty()) return sys_error("mkdtemp", errno);
    if (!artifact_name.empty()) {
      const std::string file = scratch.path() + "/" + artifact_name;
      AIR_TRY(write_file_atomically(file, artifact));
      request["artifact"] = {{"name", artifact_name}, {"file", file}};
    }
    const std::string request_file = scratch.path() + "/request.json";
    AIR_TRY(
        write_file_atomically(request_file, request.dump(-1, ' ', false, Json::error_handler_t::replace)));
    const std::vector<std::string> argv = {config_.python, "-m", "air._mlflow_store", action, request_file};
    // Importing mlflow alone takes seconds; the store's own retries come on top.
    const auto limit = config_.timeout + std::chrono::seconds(60);
    auto ran = run_captured(argv, env_, limit);
    if (!ran) {
      return Error{ErrorKind::system, fmt::format("a {} is written through the mlflow Python package, but {} "
                                                  "could not be started: {}",
                                                  describe_store(config_.uri, config_.kind), config_.python,
                                                  ran.error().message)};
    }
    const std::string last = last_line(ran->out);
    Json answer = Json::parse(last, nullptr, false);
    const std::string why = answer.is_object() && answer.contains("error") && answer["error"].is_string()
                                ? answer["error"].get<std::string>()
                                : last_line(ran->err);
    if (ran->timed_out) {
      return Error{ErrorKind::system,
                   fmt::format("air._mlflow_store {} did not finish within {}s", action,
                               std::chrono::duration_cast<std::chrono::seconds>(limit).count())};
    }
    if (ran->status.kind == ExitStatus::Kind::exited && ran->status.code == k_exit_no_mlflow) {
      return Error{ErrorKind::system,
                   fmt::format("a {} is written through the mlflow Python package, which {} cannot import "
                               "({}); install it for that interpreter (pip install mlflow) or point "
                               "mlflow.tracking_uri at a tracking server (http://HOST:PORT)",
                               describe_store(config_.uri, config_.kind), config_.python, why)};
    }
    if (!ran->status.success() || !answer.is_object()) {
      return Error{ErrorKind::system, fmt::format("air._mlflow_store {} failed ({}): {}", action,
                                                  ran->status.describe(), why.empty() ? "no answer" : why)};
    }
    return answer;
  }

  static std::string last_line(const std::string& text) {
    const std::size_t end = text.find_last_not_of("\n ");
    if (end == std::string::npos) return "";
    const std::size_t newline = text.rfind('\n', end);
    const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
    return text.substr(begin, end + 1 - begin);
  }

  TrackingConfig config_;
  Environment env_;
};

} // namespace

std::unique_ptr<Store> make_rest_store(const TrackingConfig& config);

std::unique_ptr<Store> make_store(const TrackingConfig& config, const Environment& env) {
  if (config.kind == StoreKind::python) return std::make_unique<PythonStore>(config, env);
  return make_rest_store(config);
}

} // namespace air::mlflow
