// The Python store: tracking URIs that only the mlflow package itself can
// write (file:, sqlite:, a plain path, database and plugin stores), through
// `python -m air._mlflow_store serve` run with the configured interpreter:
// one process per launch, so mlflow is imported once, while the ranks start.
#include "core/mlflow/retry.hpp"
#include "core/mlflow/store.hpp"
#include "core/os/atomic_file.hpp"
#include "core/os/capture.hpp"
#include "core/os/host.hpp"
#include "core/os/process.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>

namespace air::mlflow {

namespace {

using Json = nlohmann::ordered_json;

using Clock = std::chrono::steady_clock;

Json key_values(const std::vector<KeyValue>& items) {
  Json out = Json::array();
  for (const auto& kv : items) out.push_back({{"key", kv.key}, {"value", kv.value}});
  return out;
}

/// The last non-empty line of `text`.
std::string last_line(const std::string& text) {
  const std::size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  const std::size_t newline = text.rfind('\n', end);
  const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
  return text.substr(begin, end + 1 - begin);
}

/// A private directory for the artifact's file, removed on scope exit.
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

/// What every answer line of the helper starts with: anything else on its
/// stdout (a print in a plugin store) is not an answer.
constexpr std::string_view k_answer_mark = "@air-answer ";

/// `python -m air._mlflow_store serve`, started once per launch: it imports
/// mlflow while the ranks start, then answers the start request and, when
/// the last rank has exited, the finish request, one JSON line each way, on
/// its stdin and stdout. Started on the main thread: a child's death signal
/// (PR_SET_PDEATHSIG) follows the thread that started it, and the start may
/// be waited for on a worker thread. Its stdin closing (air-run gone, or done)
/// ends it.
class StoreHelper {
public:
  StoreHelper() = default;
  StoreHelper(const StoreHelper&) = delete;
  StoreHelper& operator=(const StoreHelper&) = delete;
  ~StoreHelper() { end(std::chrono::milliseconds(0)); }

  /// Starts it; errors are spawn_process's.
  Status launch(const std::vector<std::string>& argv, const Environment& env) {
    SpawnOptions options;
    options.stdin_pipe = true;
    auto started = start_process(argv, env, {}, options);
    if (!started) return started.error();
    auto child = confirm_exec(std::move(*started));
    if (!child) return child.error();
    child_ = std::move(*child);
#ifdef SYS_pidfd_open
    // This very process, whoever reaps it: the supervisor reaps children it
    // does not know (the helper, should it die during the run), and its pid
    // could then be another child's by the end.
    pidfd_.reset(static_cast<int>(::syscall(SYS_pidfd_open, child_.pid, 0)));
#endif
    return ok_status();
  }
  bool running() const { return child_.pid > 0; }

  /// Sends `request` and waits for the answer until `deadline`, or until
  /// `stop()` says to give up ("interrupted"). An answer that never comes
  /// (the helper ended) is an error with its last line of stderr.
  Expected<Json> ask(const Json& request, Clock::time_point deadline, const std::function<bool()>& stop) {
    if (!running()) return Error{ErrorKind::system, "the helper is not running"};
    std::string line = request.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    std::size_t sent = 0;
    while (true) {
      if (const auto answer = take_answer()) return *answer;
      if (stop && stop()) return Error{ErrorKind::system, "interrupted"};
      if (Clock::now() >= deadline) return Error{ErrorKind::system, "no answer in time"};
      if (!child_.stdout_fd) {
        const std::string why = last_line(err_);
        return Error{ErrorKind::system, "it ended without an answer" + (why.empty() ? "" : ": " + why)};
      }
      pollfd fds[3] = {{child_.stdout_fd.get(), POLLIN, 0},
                       {child_.stderr_fd.get(), POLLIN, 0},
                       {sent < line.size() ? child_.stdin_fd.get() : -1, POLLOUT, 0}};
      ::poll(fds, 3, 10); // short: `stop` is a flag or a pending signal, looked at between waits
      if (sent < line.size() && child_.stdin_fd) {
        const ssize_t n = ::write(child_.stdin_fd.get(), line.data() + sent, line.size() - sent);
        if (n > 0)
          sent += static_cast<std::size_t>(n);
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
          sent = line.size(); // gone: its EOF tells
      }
      drain(child_.stdout_fd, out_);
      drain(child_.stderr_fd, err_);
    }
  }

  /// Closes its stdin (which ends it), waits up to `grace`, then kills its
  /// group and reaps it. A supervisor that reaped it as an unknown child
  /// first leaves nothing to reap (ECHILD).
  void end(std::chrono::milliseconds grace) {
    if (!running()) return;
    child_.stdin_fd.reset();
    const auto until = Clock::now() + grace;
    // Reaped here, or gone (ECHILD: the supervisor reaped it) either way;
    // while it is neither, its pid is still its own, so its group may be killed.
    pid_t got;
    while ((got = reap(WNOHANG)) == 0 && Clock::now() < until) ::usleep(5'000);
    if (got == 0) {
      ::kill(-child_.pid, SIGKILL);
      while (reap(0) < 0 && errno == EINTR) {
      }
    }
    pidfd_.reset();
    child_ = ChildProcess{};
  }

private:
  /// waitpid for the helper, through its pidfd where there is one (so a pid
  /// that another child has taken since is never waited for): the pid once
  /// reaped, 0 while it runs (WNOHANG), -1 with errno (ECHILD: reaped before).
  pid_t reap(int flags) {
    if (pidfd_) {
      // P_PIDFD (Linux 5.4) by its number: older C libraries do not name it.
      constexpr auto k_p_pidfd = static_cast<idtype_t>(3);
      siginfo_t info{};
      if (::waitid(k_p_pidfd, static_cast<id_t>(pidfd_.get()), &info, WEXITED | flags) == 0)
        return info.si_pid;
      if (errno != EINVAL) return -1;
      pidfd_.reset(); // a kernel without P_PIDFD: by pid, as before
    }
    int wstatus = 0;
    return ::waitpid(child_.pid, &wstatus, flags);
  }

  /// Reads what a nonblocking pipe has; resets it at EOF.
  static void drain(UniqueFd& fd, std::string& into) {
    char buf[4096];
    while (fd) {
      const ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        if (into.size() < (1u << 20)) into.append(buf, static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      fd.reset();
    }
  }

  /// The first complete answer line of stdout, taken off it.
  std::optional<Json> take_answer() {
    std::size_t newline;
    while ((newline = out_.find('\n')) != std::string::npos) {
      const std::string line = out_.substr(0, newline);
      out_.erase(0, newline + 1);
      if (line.rfind(k_answer_mark, 0) != 0) continue;
      Json answer = Json::parse(line.substr(k_answer_mark.size()), nullptr, false);
      if (answer.is_object()) return answer;
    }
    return std::nullopt;
  }

  ChildProcess child_;
  UniqueFd pidfd_; ///< the helper itself (Linux 5.3 and later); empty where there is none
  std::string out_, err_;
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

  ~PythonStore() override { helper_.end(std::chrono::milliseconds(0)); }

  void prepare() override {
    if (helper_.running() || launch_error_) return;
    const std::vector<std::string> argv = {config_.python, "-m", "air._mlflow_store", "serve"};
    if (auto launched = helper_.launch(argv, env_); !launched) {
      launch_error_ = Error{
          ErrorKind::system,
          fmt::format("a {} is written through the mlflow Python package, but {} could not be started: {}",
                      describe_store(config_.uri, config_.kind), config_.python, launched.error().message)};
    }
  }

  Expected<Started> start(const StartRequest& request, const std::atomic<bool>* stop) override {
    prepare();
    if (launch_error_) return *launch_error_;
    Json j;
    j["action"] = "start";
    j["tracking_uri"] = config_.uri;
    j["experiment_name"] = request.experiment_name;
    j["experiment_id"] = request.experiment_id;
    j["parent_run_id"] = request.parent_run_id;
    j["run_name"] = request.run_name;
    j["start_time"] = request.start_time_ms;
    j["tags"] = key_values(request.tags);
    j["params"] = key_values(request.params);
    auto answer = ask("start", j, stop);
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
    j["action"] = "finish";
    j["tracking_uri"] = config_.uri;
    j["run_id"] = request.run.run_id;
    j["status"] = request.status;
    j["end_time"] = request.end_time_ms;
    Json metrics = Json::array();
    for (const auto& m : request.metrics)
      metrics.push_back({{"key", m.key}, {"value", m.value}, {"timestamp", m.timestamp}, {"step", m.step}});
    j["metrics"] = std::move(metrics);
    j["tags"] = key_values(request.tags);
    ScratchDir scratch(env_);
    if (!request.artifact_name.empty() && request.artifact_content && scratch.path().empty()) {
      result.errors.push_back(request.artifact_name +
                              " not uploaded: " + sys_error("mkdtemp", errno).message);
    } else if (!request.artifact_name.empty() && request.artifact_content) {
      const std::string file = scratch.path() + "/" + request.artifact_name;
      if (auto written = write_file_atomically(file, request.artifact_content()); !written) {
        result.errors.push_back(request.artifact_name + " not uploaded: " + written.error().message);
      } else {
        j["artifact"] = {{"name", request.artifact_name}, {"file", file}};
        // The more artifacts (the page) go with the summary only, each rendered after it.
        Json more_files = Json::array();
        for (const auto& more : request.more_artifacts) {
          const std::string more_file = scratch.path() + "/" + more.name;
          if (auto more_written = write_file_atomically(more_file, more.content ? more.content() : "");
              !more_written)
            result.errors.push_back(more.name + " not uploaded: " + more_written.error().message);
          else
            more_files.push_back({{"name", more.name}, {"file", more_file}});
        }
        if (!more_files.empty()) j["more_artifacts"] = std::move(more_files);
      }
    }
    auto answer = ask("finish", j, nullptr);
    // It ends by itself once its stdin closes; after a Ctrl-C nothing is waited for.
    helper_.end(std::chrono::milliseconds(interrupted_ != 0 ? 0 : 2000));
    if (!answer) {
      result.errors.push_back(answer.error().message);
      return result;
    }
    result.status_set = answer->value("status_set", "");
    result.artifact_path = answer->value("artifact_path", "");
    for (const auto& path : answer->value("more_paths", Json::array()))
      result.more_paths.push_back(path.get<std::string>());
    for (const auto& e : answer->value("errors", Json::array()))
      result.errors.push_back(e.get<std::string>());
    return result;
  }

  int interrupted_by() const override { return interrupted_; }
  bool starts_in_background() const override { return true; }

private:
  /// One exchange with the helper, its failures in the words of the store.
  /// Without `stop` (the main thread), a SIGINT, SIGTERM or SIGHUP ends the
  /// wait at once (interrupted_by()).
  Expected<Json> ask(const char* action, const Json& request, const std::atomic<bool>* stop) {
    // Importing mlflow alone takes seconds; the store's own retries come on top.
    const auto limit = config_.timeout + std::chrono::seconds(60);
    const std::function<bool()> stopped = [this, stop] {
      if (stop != nullptr) return stop->load();
      if (interrupt_pending()) interrupted_ = wait_for_interrupt(std::chrono::milliseconds(0));
      return interrupted_ != 0;
    };
    auto answer = helper_.ask(request, Clock::now() + limit, stopped);
    if (!answer) {
      const std::string& why = answer.error().message;
      if (why == "interrupted") return answer.error();
      if (why == "no answer in time") {
        helper_.end(std::chrono::milliseconds(0));
        return Error{ErrorKind::system,
                     fmt::format("air._mlflow_store {} did not finish within {}s", action,
                                 std::chrono::duration_cast<std::chrono::seconds>(limit).count())};
      }
      return Error{ErrorKind::system, fmt::format("air._mlflow_store {} failed: {}", action, why)};
    }
    if (answer->value("no_mlflow", false)) {
      return Error{ErrorKind::system,
                   fmt::format("a {} is written through the mlflow Python package, which {} cannot import "
                               "({}); install it for that interpreter (pip install mlflow) or point "
                               "mlflow.tracking_uri at a tracking server (http://HOST:PORT)",
                               describe_store(config_.uri, config_.kind), config_.python,
                               answer->value("error", ""))};
    }
    if (answer->contains("error")) {
      return Error{ErrorKind::system, fmt::format("air._mlflow_store {} failed: {}", action,
                                                  answer->value("error", "no answer"))};
    }
    return answer;
  }

  TrackingConfig config_;
  Environment env_;
  StoreHelper helper_;
  std::optional<Error> launch_error_;
  int interrupted_ = 0;
};

} // namespace

std::unique_ptr<Store> make_rest_store(const TrackingConfig& config);

std::unique_ptr<Store> make_store(const TrackingConfig& config, const Environment& env) {
  if (config.kind == StoreKind::python) return std::make_unique<PythonStore>(config, env);
  return make_rest_store(config);
}

} // namespace air::mlflow
