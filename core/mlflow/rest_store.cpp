// The REST store: an MLflow tracking server or a Databricks workspace,
// reached over HTTP(S) with bounded retries. Only what the ranks need before
// they start (the experiment, the run) is asked for before launch; the params
// are logged by a thread while the ranks start, and the final steps (status,
// metrics, artifact) go side by side, so a launch waits for as few round trips
// as possible.
#include "core/mlflow/http.hpp"
#include "core/mlflow/retry.hpp"
#include "core/mlflow/store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

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

Error interrupted(std::string_view what) {
  return Error{ErrorKind::system, fmt::format("{}: interrupted", what)};
}

/// What ends a sequence of REST calls early.
class Cancel {
public:
  virtual ~Cancel() = default;
  /// True once the calls should stop; also checked during transfers.
  virtual bool requested() = 0;
  /// Waits up to `delay`; true when cancelled meanwhile.
  virtual bool wait(milliseconds delay) = 0;
};

/// The main thread's: SIGINT, SIGTERM or SIGHUP (which air-run keeps blocked
/// outside the supervisor) ends the call in flight and every one after it.
class SignalCancel final : public Cancel {
public:
  bool requested() override {
    if (signal_ == 0 && interrupt_pending()) signal_ = wait_for_interrupt(milliseconds(0));
    return signal_ != 0;
  }
  bool wait(milliseconds delay) override {
    if (signal_ == 0) signal_ = wait_for_interrupt(delay);
    return signal_ != 0;
  }
  /// The signal taken, 0 when none came.
  int signal() const { return signal_; }

private:
  int signal_ = 0;
};

/// A worker thread's: stopped by the main thread, never by a signal (a worker
/// that took a Ctrl-C would take it from the supervisor).
class StopFlag final : public Cancel {
public:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopped_ = true;
    }
    changed_.notify_all();
  }
  bool requested() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopped_;
  }
  bool wait(milliseconds delay) override {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, delay, [this] { return stopped_; });
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopped_ = false;
};

/// A worker thread's, stopped through a flag another thread sets: the run's
/// creation while the ranks start (Tracker), stopped by the main thread.
class FlagCancel final : public Cancel {
public:
  explicit FlagCancel(const std::atomic<bool>& stop) : stop_(stop) {}
  bool requested() override { return stop_.load(); }
  bool wait(milliseconds delay) override {
    // Short slices: a stop is seen within 10 ms, and a backoff is at most 2 s.
    const auto until = Clock::now() + delay;
    while (!requested() && Clock::now() < until)
      std::this_thread::sleep_for(std::min<Clock::duration>(milliseconds(10), until - Clock::now()));
    return requested();
  }

private:
  const std::atomic<bool>& stop_;
};

/// One REST step on a thread of its own, with its own connection. `work`
/// returns what failed, nullopt when the step worked.
class Job {
public:
  using Work = std::function<std::optional<std::string>(HttpClient&, Cancel&)>;

  Job(HttpAuth auth, Work work)
      : thread_([this, auth = std::move(auth), work = std::move(work)]() mutable {
          HttpClient client(std::move(auth));
          client.set_abort_check([this] { return stop_.requested(); });
          error_ = work(client, stop_);
          done_ = true;
        }) {}
  ~Job() {
    stop();
    join();
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  bool done() const { return done_; }
  void stop() { stop_.stop(); }
  /// Waits for the step; what failed, nullopt when it worked.
  std::optional<std::string> join() {
    if (thread_.joinable()) thread_.join();
    return error_;
  }

private:
  StopFlag stop_;
  std::atomic<bool> done_{false};
  std::optional<std::string> error_;
  std::thread thread_; // last: it starts once the members above exist
};

/// Waits for every job while taking Ctrl-C on this (the main) thread: a signal
/// stops them all. Returns the signal, 0 when they finished by themselves.
int wait_for_jobs(const std::vector<Job*>& jobs) {
  int sig = 0;
  while (sig == 0 && !std::all_of(jobs.begin(), jobs.end(), [](const Job* j) { return j->done(); }))
    sig = wait_for_interrupt(milliseconds(1));
  if (sig != 0) {
    for (Job* job : jobs) job->stop();
  }
  for (Job* job : jobs) job->join();
  return sig;
}

class RestStore final : public Store {
public:
  explicit RestStore(TrackingConfig config) : config_(std::move(config)) {}

  Expected<Started> start(const StartRequest& request, const std::atomic<bool>* stop) override {
    AIR_TRY(HttpClient::available(config_.api_base)); // no retries for a library that is not there
    HttpClient client(auth());
    if (stop != nullptr) {
      FlagCancel cancel(*stop);
      client.set_abort_check([&cancel] { return cancel.requested(); });
      return start_run(client, cancel, request);
    }
    SignalCancel cancel;
    client.set_abort_check([&cancel] { return cancel.requested(); });
    auto started = start_run(client, cancel, request);
    interrupted_ = cancel.signal();
    return started;
  }

  bool starts_in_background() const override { return true; }

  FinishResult finish(const FinishRequest& request) override {
    FinishResult result;
    const auto deadline = Clock::now() + config_.timeout;
    const auto artifact_path =
        request.artifact_name.empty() ? std::nullopt : proxied_artifact_path(request.run.artifact_uri);
    // Rendered here, on the main thread: the content is the caller's.
    const std::string content =
        artifact_path && request.artifact_content ? request.artifact_content() : std::string();

    std::unique_ptr<Job> update, metrics, upload;
    std::vector<std::unique_ptr<Job>> more_uploads;
    if (!request.status.empty()) {
      update = job([this, request, deadline](HttpClient& c, Cancel& cancel) -> std::optional<std::string> {
        auto updated = call(c, cancel, "POST", api_url(config_.api_base, "runs/update"),
                            update_run_body(request.run.run_id, request.status, request.end_time_ms),
                            deadline, "runs/update");
        if (!updated) return updated.error().message;
        if (updated->status != 200) return "runs/update: " + describe_answer(*updated);
        return std::nullopt;
      });
    }
    if (!request.metrics.empty() || !request.tags.empty()) {
      metrics = job([this, request, deadline](HttpClient& c, Cancel& cancel) -> std::optional<std::string> {
        auto logged = log_batches(c, cancel, request.run.run_id, {}, request.metrics, request.tags, deadline);
        if (!logged) return logged.error().message;
        return std::nullopt;
      });
    }
    if (artifact_path) {
      upload = upload_job(
          artifact_url(config_.api_base, *artifact_path, request.artifact_name),
          [content] { return content; }, "application/json", deadline);
      // The more artifacts (the page) go with the summary only, rendered
      // after it (request.more_artifacts) on their own connection's thread:
      // drawing the page overlaps the summary's upload.
      if (request.artifact_content) {
        for (const MoreArtifact& more : request.more_artifacts) {
          more_uploads.push_back(upload_job(artifact_url(config_.api_base, *artifact_path, more.name),
                                            more.content, more.content_type, deadline));
        }
      }
    }

    std::vector<Job*> jobs;
    for (Job* j : {params_.get(), update.get(), metrics.get(), upload.get()}) {
      if (j != nullptr) jobs.push_back(j);
    }
    for (const auto& j : more_uploads) jobs.push_back(j.get());
    if (const int sig = wait_for_jobs(jobs); sig != 0) interrupted_ = sig;

    if (params_) {
      if (auto failed = params_->join()) result.errors.push_back("params not logged: " + *failed);
      params_.reset();
    }
    if (update) {
      if (auto failed = update->join())
        result.errors.push_back("status " + request.status + " not set: " + *failed);
      else
        result.status_set = request.status;
    }
    if (metrics) {
      if (auto failed = metrics->join()) result.errors.push_back("metrics not logged: " + *failed);
    }
    if (upload) {
      if (auto failed = upload->join())
        result.errors.push_back(request.artifact_name + " not uploaded: " + *failed);
      else
        result.artifact_path = request.artifact_name;
    }
    for (std::size_t i = 0; i < more_uploads.size(); ++i) {
      const std::string& name = request.more_artifacts[i].name;
      if (auto failed = more_uploads[i]->join())
        result.errors.push_back(name + " not uploaded: " + *failed);
      else
        result.more_paths.push_back(name);
    }
    return result;
  }

  int interrupted_by() const override { return interrupted_; }

private:
  HttpAuth auth() const {
    return HttpAuth{config_.bearer_token, config_.basic_user, config_.basic_password, config_.insecure_tls,
                    config_.ca_file};
  }

  std::unique_ptr<Job> job(Job::Work work) const { return std::make_unique<Job>(auth(), std::move(work)); }

  /// One artifact's upload through the artifacts proxy (PUT of its bytes),
  /// rendered by `render` on the job's thread first.
  std::unique_ptr<Job> upload_job(std::string url, std::function<std::string()> render,
                                  std::string content_type, Clock::time_point deadline) const {
    return job([this, url = std::move(url), render = std::move(render), type = std::move(content_type),
                deadline](HttpClient& c, Cancel& cancel) -> std::optional<std::string> {
      const std::string content = render ? render() : std::string();
      auto put = call(c, cancel, "PUT", url, content, deadline, "artifact upload", type.c_str());
      if (!put) return put.error().message;
      if (put->status != 200) return describe_answer(*put);
      return std::nullopt;
    });
  }

  Expected<Started> start_run(HttpClient& client, Cancel& cancel, const StartRequest& request) {
    const auto deadline = Clock::now() + config_.timeout;
    Started started;
    std::vector<KeyValue> tags = request.tags;
    std::string experiment_id = request.experiment_id;
    std::string parent = request.parent_run_id;
    if (!parent.empty()) {
      auto nest = check_parent(client, cancel, parent, deadline);
      if (!nest) return nest.error();
      if (nest->why_not.empty()) {
        experiment_id = nest->experiment_id; // a child lives in its parent's experiment
      } else {
        started.warnings.push_back(fmt::format(
            "MLFLOW_RUN_ID {} is not a run to nest under: it {}; the launch's run is a top-level one", parent,
            nest->why_not));
        parent.clear();
        tags.erase(std::remove_if(tags.begin(), tags.end(),
                                  [](const KeyValue& t) { return t.key == "mlflow.parentRunId"; }),
                   tags.end());
      }
    }
    if (parent.empty() && !request.experiment_name.empty()) {
      auto id = find_or_create_experiment(client, cancel, request.experiment_name, deadline);
      if (!id) return id.error();
      experiment_id = *id;
    }
    if (experiment_id.empty()) experiment_id = "0"; // MLflow's Default experiment

    auto run = create_run(client, cancel, experiment_id, request, tags, deadline);
    if (!run) return run.error();
    started.run = *run;
    started.parent_run_id = parent;
    // The ranks need the run's id, not its params: those are logged while the ranks start.
    if (!request.params.empty()) {
      const auto params_deadline = Clock::now() + config_.timeout;
      params_ = job([this, run_id = run->run_id, params = request.params,
                     params_deadline](HttpClient& c, Cancel& stop) -> std::optional<std::string> {
        auto logged = log_batches(c, stop, run_id, params, {}, {}, params_deadline);
        if (!logged) return logged.error().message;
        return std::nullopt;
      });
    }
    return started;
  }

  /// Whether to nest under the caller's run: its experiment, or why not.
  struct Nesting {
    std::string experiment_id;
    std::string why_not; ///< "does not exist", "is deleted", "is FINISHED"; "" to nest
  };

  Expected<Nesting> check_parent(HttpClient& client, Cancel& cancel, const std::string& parent,
                                 Clock::time_point deadline) {
    auto got =
        call(client, cancel, "GET", api_url(config_.api_base, "runs/get?run_id=" + query_escape(parent)), "",
             deadline, "runs/get (the parent run)");
    if (!got) return got.error();
    if (got->status != 200) {
      const auto e = parse_api_error(got->body);
      // A run id that was never one (INVALID_PARAMETER_VALUE) is as gone as a removed one.
      if (e && (e->code == "RESOURCE_DOES_NOT_EXIST" || e->code == "INVALID_PARAMETER_VALUE"))
        return Nesting{"", "does not exist"};
      return Error{ErrorKind::system,
                   fmt::format("parent run {} (MLFLOW_RUN_ID): {}", parent, describe_answer(*got))};
    }
    auto run = parse_run(got->body);
    if (!run) return run.error();
    // The ranks' own client refuses to resume a deleted run; a finished one is a leftover.
    if (run->lifecycle_stage == "deleted") return Nesting{"", "is deleted"};
    if (!run->status.empty() && run->status != "RUNNING") return Nesting{"", "is " + run->status};
    return Nesting{run->experiment_id, ""};
  }

  /// runs/create, safe to retry: a create whose answer was lost (no answer,
  /// a timeout, a 5xx from a proxy in front) may have made the run, so before
  /// creating again the experiment is searched for the launch's token, and a
  /// run found is adopted instead of made twice.
  Expected<RunRef> create_run(HttpClient& client, Cancel& cancel, const std::string& experiment_id,
                              const StartRequest& request, const std::vector<KeyValue>& tags,
                              Clock::time_point deadline) {
    const std::string create_url = api_url(config_.api_base, "runs/create");
    const std::string create_body =
        create_run_body(experiment_id, request.run_name, request.start_time_ms, tags);
    const std::string search_url = api_url(config_.api_base, "runs/search");
    const std::string search_body =
        search_runs_by_tag_body(experiment_id, k_launch_token_tag, request.launch_token);
    bool maybe_created = false;
    std::optional<RunRef> found;
    auto answer =
        with_retries(cancel, deadline, "runs/create", [&](milliseconds timeout) -> Expected<HttpResponse> {
          if (maybe_created && !request.launch_token.empty()) {
            auto searched =
                client.send(HttpRequest{"POST", search_url, search_body, "application/json", timeout});
            if (!searched || judge_attempt(searched->status) == Verdict::retry)
              return searched; // still unknown
            if (searched->status == 200) {
              if (auto runs = parse_searched_runs(searched->body); runs && !runs->empty()) {
                found = runs->front();
                return HttpResponse{200, ""};
              }
            }
            // Not made (or a server that cannot search: creating again is then the only way on).
            maybe_created = false;
          }
          auto sent =
              client.send(HttpRequest{"POST", create_url, create_body, "application/json", timeout, true});
          if (!sent || judge_attempt(sent->status) == Verdict::retry) maybe_created = true;
          return sent;
        });
    if (!answer) return answer.error();
    if (found) return *found;
    if (answer->status != 200) return Error{ErrorKind::system, "runs/create: " + describe_answer(*answer)};
    return parse_run(answer->body);
  }

  /// Attempts until one gives an answer not worth retrying (any 2xx or 4xx
  /// but 408/429), with backoff, until `deadline`; an error when the budget
  /// ran out or `cancel` ended it. `attempt` gets the time it may take.
  template <class Attempt>
  Expected<HttpResponse> with_retries(Cancel& cancel, Clock::time_point deadline, std::string_view what,
                                      Attempt&& attempt) const {
    std::string last;
    int attempts = 0;
    for (;;) {
      if (cancel.requested()) return interrupted(what);
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0 && attempts > 0) break;
      auto sent = attempt(std::clamp(left, milliseconds(200), k_attempt_timeout));
      ++attempts;
      if (sent && judge_attempt(sent->status) == Verdict::done) return sent;
      if (cancel.requested()) return interrupted(what);
      last = sent ? describe_answer(*sent) : sent.error().message;
      const auto now_left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (now_left.count() <= 0) break;
      if (cancel.wait(std::min(backoff_delay(attempts - 1), now_left))) return interrupted(what);
    }
    return Error{ErrorKind::system,
                 fmt::format("{}: no usable answer within {} ({} attempt{}): {}", what,
                             seconds_text(config_.timeout), attempts, attempts == 1 ? "" : "s", last)};
  }

  /// One REST call with retries (with_retries).
  Expected<HttpResponse> call(HttpClient& client, Cancel& cancel, const char* method, const std::string& url,
                              const std::string& body, Clock::time_point deadline, std::string_view what,
                              const char* content_type = "application/json") const {
    return with_retries(cancel, deadline, what, [&](milliseconds timeout) {
      return client.send(HttpRequest{method, url, body, content_type, timeout});
    });
  }

  Expected<std::string> find_or_create_experiment(HttpClient& client, Cancel& cancel, const std::string& name,
                                                  Clock::time_point deadline) {
    const std::string lookup_url =
        api_url(config_.api_base, "experiments/get-by-name?experiment_name=" + query_escape(name));
    // Two rounds: another launcher may create the experiment between our lookup and our create.
    for (int round = 0; round < 2; ++round) {
      auto found = call(client, cancel, "GET", lookup_url, "", deadline, "experiments/get-by-name");
      if (!found) return found.error();
      if (found->status == 200) return parse_experiment_lookup(found->body);
      const auto error = parse_api_error(found->body);
      if (found->status != 404 || !error || error->code != "RESOURCE_DOES_NOT_EXIST")
        return Error{ErrorKind::system, "experiments/get-by-name: " + describe_answer(*found)};
      auto created =
          call(client, cancel, "POST", api_url(config_.api_base, "experiments/create"),
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

  Status log_batches(HttpClient& client, Cancel& cancel, const std::string& run_id,
                     const std::vector<KeyValue>& params, const std::vector<MetricPoint>& metrics,
                     const std::vector<KeyValue>& tags, Clock::time_point deadline) const {
    for (const std::string& body : log_batch_bodies(run_id, params, metrics, tags)) {
      auto logged = call(client, cancel, "POST", api_url(config_.api_base, "runs/log-batch"), body, deadline,
                         "runs/log-batch");
      if (!logged) return logged.error();
      if (logged->status != 200)
        return Error{ErrorKind::system, "runs/log-batch: " + describe_answer(*logged)};
    }
    return ok_status();
  }

  TrackingConfig config_;
  int interrupted_ = 0;
  std::unique_ptr<Job> params_; ///< logging the params while the ranks start; joined by finish()
};

} // namespace

std::unique_ptr<Store> make_rest_store(const TrackingConfig& config) {
  return std::make_unique<RestStore>(config);
}

} // namespace air::mlflow
