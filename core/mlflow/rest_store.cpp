// The REST store: an MLflow tracking server or a Databricks workspace,
// reached over HTTP(S) with bounded retries.
#include "core/mlflow/http.hpp"
#include "core/mlflow/retry.hpp"
#include "core/mlflow/store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

namespace air::mlflow {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// One attempt never waits longer than this, so a hung server costs at most
// this much beyond the retry budget.
constexpr milliseconds k_attempt_timeout{10'000};

std::string describe_answer(const HttpResponse& r) {
  if (auto e = parse_api_error(r.body)) {
    std::string message = e->message.substr(0, 300);
    std::replace(message.begin(), message.end(), '\n', ' ');
    return fmt::format("HTTP {} {}: {}", r.status, e->code, message);
  }
  return fmt::format("HTTP {}", r.status);
}

std::string seconds_text(milliseconds ms) {
  if (ms.count() % 1000 == 0) return fmt::format("{}s", ms.count() / 1000);
  return fmt::format("{:.1f}s", static_cast<double>(ms.count()) / 1000.0);
}

class RestStore final : public Store {
public:
  explicit RestStore(TrackingConfig config) : config_(std::move(config)) {}

  Expected<Started> start(const StartRequest& request) override {
    AIR_TRY(HttpClient::available()); // no retries for a library that is not there
    HttpClient client(auth());
    client.set_abort_check(interrupt_pending);
    const auto deadline = Clock::now() + config_.timeout;

    std::string experiment_id = request.experiment_id;
    if (!request.parent_run_id.empty()) {
      auto got = call(client, "GET",
                      api_url(config_.api_base, "runs/get?run_id=" + query_escape(request.parent_run_id)), "",
                      deadline, "runs/get (the parent run)");
      if (!got) return got.error();
      if (got->status != 200) {
        return Error{ErrorKind::system, fmt::format("parent run {} (MLFLOW_RUN_ID) not found: {}",
                                                    request.parent_run_id, describe_answer(*got))};
      }
      auto parent = parse_run(got->body);
      if (!parent) return parent.error();
      experiment_id = parent->experiment_id; // a child lives in its parent's experiment
    } else if (!request.experiment_name.empty()) {
      auto id = find_or_create_experiment(client, request.experiment_name, deadline);
      if (!id) return id.error();
      experiment_id = *id;
    }
    if (experiment_id.empty()) experiment_id = "0"; // MLflow's Default experiment

    auto created = call(client, "POST", api_url(config_.api_base, "runs/create"),
                        create_run_body(experiment_id, request.run_name, request.start_time_ms, request.tags),
                        deadline, "runs/create");
    if (!created) return created.error();
    if (created->status != 200) return Error{ErrorKind::system, "runs/create: " + describe_answer(*created)};
    auto run = parse_run(created->body);
    if (!run) return run.error();

    Started started{*run, {}};
    if (auto logged = log_batches(client, run->run_id, request.params, {}, {}, deadline); !logged)
      started.errors.push_back("params not logged: " + logged.error().message);
    return started;
  }

  FinishResult finish(const FinishRequest& request) override {
    FinishResult result;
    HttpClient client(auth());
    client.set_abort_check(interrupt_pending);
    const auto deadline = Clock::now() + config_.timeout;
    if (!request.status.empty()) {
      auto updated = call(client, "POST", api_url(config_.api_base, "runs/update"),
                          update_run_body(request.run.run_id, request.status, request.end_time_ms), deadline,
                          "runs/update");
      if (!updated) {
        result.errors.push_back("status " + request.status + " not set: " + updated.error().message);
      } else if (updated->status != 200) {
        result.errors.push_back("status " + request.status +
                                " not set: runs/update: " + describe_answer(*updated));
      } else {
        result.status_set = request.status;
      }
    }
    if (auto logged = log_batches(client, request.run.run_id, {}, request.metrics, request.tags, deadline);
        !logged) {
      result.errors.push_back("metrics not logged: " + logged.error().message);
    }
    if (!request.artifact_name.empty()) upload_artifact(client, request, deadline, result);
    return result;
  }

  int interrupted_by() const override { return interrupted_; }

private:
  HttpAuth auth() const {
    return HttpAuth{config_.bearer_token, config_.basic_user, config_.basic_password, config_.insecure_tls,
                    config_.ca_file};
  }

  /// One REST call with retries until `deadline`: returns the first answer
  /// that is not worth retrying (any 2xx or 4xx but 408/429); an error when
  /// the budget ran out or a signal came.
  Expected<HttpResponse> call(HttpClient& client, const char* method, const std::string& url,
                              const std::string& body, Clock::time_point deadline, std::string_view what,
                              const char* content_type = "application/json") {
    std::string last;
    int attempts = 0;
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 && attempts > 0) break;
      HttpRequest request{method, url, body, content_type,
                          std::clamp(left, milliseconds(200), k_attempt_timeout)};
      auto sent = client.send(request);
      ++attempts;
      if (sent && judge_attempt(sent->status) == Verdict::done) return sent;
      if (!sent && interrupt_pending()) {
        interrupted_ = wait_for_interrupt(milliseconds(0));
        return Error{ErrorKind::system, fmt::format("{}: interrupted", what)};
      }
      last = sent ? describe_answer(*sent) : sent.error().message;
      const auto now_left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (now_left.count() <= 0) break;
      const int sig = wait_for_interrupt(std::min(backoff_delay(attempts - 1), now_left));
      if (sig != 0) {
        interrupted_ = sig;
        return Error{ErrorKind::system, fmt::format("{}: interrupted", what)};
      }
    }
    return Error{ErrorKind::system,
                 fmt::format("{}: no usable answer within {} ({} attempt{}): {}", what,
                             seconds_text(config_.timeout), attempts, attempts == 1 ? "" : "s", last)};
  }

  Expected<std::string> find_or_create_experiment(HttpClient& client, const std::string& name,
                                                  Clock::time_point deadline) {
    const std::string lookup_url =
        api_url(config_.api_base, "experiments/get-by-name?experiment_name=" + query_escape(name));
    // Two rounds: another launcher may create the experiment between our lookup and our create.
    for (int round = 0; round < 2; ++round) {
      auto found = call(client, "GET", lookup_url, "", deadline, "experiments/get-by-name");
      if (!found) return found.error();
      if (found->status == 200) return parse_experiment_lookup(found->body);
      const auto error = parse_api_error(found->body);
      if (found->status != 404 || !error || error->code != "RESOURCE_DOES_NOT_EXIST")
        return Error{ErrorKind::system, "experiments/get-by-name: " + describe_answer(*found)};
      auto created =
          call(client, "POST", api_url(config_.api_base, "experiments/create"),
               create_experiment_body(name, {{"air.created_by", "air-run"}}), deadline, "experiments/create");
      if (!created) return created.error();
      if (created->status == 200) return parse_experiment_created(created->body);
      const auto create_error = parse_api_error(created->body);
      const bool exists = create_error && (create_error->code == "RESOURCE_ALREADY_EXISTS" ||
                                           create_error->code == "ALREADY_EXISTS");
      if (!exists) return Error{ErrorKind::system, "experiments/create: " + describe_answer(*created)};
    }
    return Error{ErrorKind::system, fmt::format("experiment '{}' could be neither found nor created", name)};
  }

  Status log_batches(HttpClient& client, const std::string& run_id, const std::vector<KeyValue>& params,
                     const std::vector<MetricPoint>& metrics, const std::vector<KeyValue>& tags,
                     Clock::time_point deadline) {
    for (const std::string& body : log_batch_bodies(run_id, params, metrics, tags)) {
      auto logged =
          call(client, "POST", api_url(config_.api_base, "runs/log-batch"), body, deadline, "runs/log-batch");
      if (!logged) return logged.error();
      if (logged->status != 200)
        return Error{ErrorKind::system, "runs/log-batch: " + describe_answer(*logged)};
    }
    return ok_status();
  }

  void upload_artifact(HttpClient& client, const FinishRequest& request, Clock::time_point deadline,
                       FinishResult& result) {
    const auto path = proxied_artifact_path(request.run.artifact_uri);
    // A server that does not proxy this run's artifact store (dbfs:, s3:, a
    // path of its own) takes no upload: only the mlflow client could write there.
    if (!path) return;
    const std::string content = request.artifact_content ? request.artifact_content() : std::string();
    auto put = call(client, "PUT", artifact_url(config_.api_base, *path, request.artifact_name), content,
                    deadline, "artifact upload");
    if (!put) {
      result.errors.push_back(request.artifact_name + " not uploaded: " + put.error().message);
    } else if (put->status != 200) {
      result.errors.push_back(request.artifact_name + " not uploaded: " + describe_answer(*put));
    } else {
      result.artifact_path = request.artifact_name;
    }
  }

  TrackingConfig config_;
  int interrupted_ = 0;
};

} // namespace

std::unique_ptr<Store> make_rest_store(const TrackingConfig& config) {
  return std::make_unique<RestStore>(config);
}

} // namespace air::mlflow
