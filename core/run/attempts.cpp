// The attempt loop around supervise(): torchrun's --max-restarts.
#include "core/run/attempts.hpp"

#include "core/base/speaker.hpp"
#include "core/os/signals.hpp"
#include "core/run/resume.hpp"
#include "core/warm/warm_start.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

/// "rank3.log" -> "rank3.attempt2.log": every attempt keeps its own output.
std::string attempt_log(const std::string& path, int attempt) {
  if (path.empty() || attempt == 0) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() / fmt::format("{}.attempt{}{}", p.stem().string(), attempt, p.extension().string()))
      .string();
}

/// torchrun's -r/-t files of attempt `from` as attempt `to`'s:
/// ".../attempt_0/1/stdout.log" -> ".../attempt_2/1/stdout.log", as torchrun lays them out.
std::string torchrun_attempt_file(const std::string& path, int from, int to) {
  const std::string segment = fmt::format("/attempt_{}/", from);
  const auto at = path.rfind(segment);
  if (path.empty() || at == std::string::npos) return path;
  return path.substr(0, at) + fmt::format("/attempt_{}/", to) + path.substr(at + segment.size());
}

/// The previous attempt's result and error files must not be read as this
/// attempt's: a rank that fails silently now would show the old traceback.
void clear_rank_files(const LaunchPlan& plan) {
  std::error_code ignored;
  for (const auto& rank : plan.ranks) {
    std::filesystem::remove(rank.result_file, ignored);
    std::filesystem::remove(rank.error_file, ignored);
  }
}

void say(const ConsoleOptions& console, const std::string& line) {
  const std::string text = said("air-run: " + line + "\n");
  [[maybe_unused]] const auto n = ::write(console.stderr_fd, text.data(), text.size());
}

} // namespace

// A hang is a failure of the group: with restarts left it is restarted (stacks
// and traces of the attempt kept), as a rank's failure is. A timeout or an
// interrupt ends the run.
bool restartable_outcome(const RunOutcome& outcome) {
  return outcome.status == RunOutcome::Status::failed || outcome.status == RunOutcome::Status::hung;
}

LaunchPlan plan_for_attempt(const LaunchPlan& first, int attempt, int master_port,
                            std::optional<std::chrono::milliseconds> timeout_left) {
  LaunchPlan plan = first;
  plan.attempt = attempt;
  plan.master_port = master_port;
  plan.timeout = timeout_left;
  for (auto& rank : plan.ranks) {
    rank.env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(attempt);
    rank.env["MASTER_PORT"] = std::to_string(master_port);
    rank.log_file = attempt_log(rank.log_file, attempt);
    for (auto& file : rank.stream_files) file = torchrun_attempt_file(file, first.attempt, attempt);
    if (rank.error_file.ends_with(
            "/error.json")) { // torchrun's, beside the -r/-t files (rankN.error.json is ours)
      rank.error_file = torchrun_attempt_file(rank.error_file, first.attempt, attempt);
      rank.env["TORCHELASTIC_ERROR_FILE"] = rank.error_file;
    }
  }
  return plan;
}

AttemptRecord attempt_record(const LaunchPlan& plan, const RunOutcome& outcome) {
  AttemptRecord r;
  r.attempt = plan.attempt;
  r.exit_code = outcome.exit_code();
  r.root_cause_rank = outcome.root_cause_rank;
  r.reason = outcome.reason;
  r.status = outcome.remote_failure && outcome.remote_failure->membership_change
                 ? "membership_change"
                 : std::string(to_string(outcome.status));
  r.remote_failure = outcome.remote_failure;
  r.master_port = plan.master_port;
  r.resumed_from = plan.resume_from;
  if (plan.num_nodes == 1) r.nodes = {plan.node_name}; // several: the control connection knows them
  r.started_at = outcome.started_at;
  r.ended_at = outcome.ended_at;
  r.duration_s = outcome.duration_s;
  return r;
}

namespace {

/// The run's warm interpreter, or null when --preload is off or it cannot
/// be started (then said, and the ranks start fresh).
std::unique_ptr<WarmStart> start_warm_interpreter(const LaunchPlan& plan, const ConsoleOptions& console) {
  if (plan.preload.empty() || plan.ranks.empty()) return nullptr;
  std::vector<const RankEnvironment*> envs;
  envs.reserve(plan.ranks.size());
  for (const auto& r : plan.ranks) envs.push_back(&r.env);
  Environment env = common_environment(envs);
  // The interpreter is no rank: with one rank, its variables would be common.
  // Nor does it wait for the MLflow run (mlflow/rank_wait.hpp): ranks it
  // forks get the run in their environment, which replaces its own.
  for (const char* name : {"RANK", "LOCAL_RANK", "ROLE_RANK", "AIR_RESULT_FILE", "TORCHELASTIC_ERROR_FILE",
                           "AIR_RUN_STACK_FILE", "AIR_RUN_STACK_SIGNAL", "AIR_RUN_PROGRESS_FILE",
                           "AIR_RUN_MLFLOW_RUN_FILE", "AIR_RUN_MLFLOW_RUN_WAIT"})
    env.erase(name);
  const auto target = warm_target(plan.ranks.front().argv, plan.python);
  if (!target) return nullptr; // `python -c`, other options: every rank starts fresh anyway
  auto warm = WarmStart::start(plan.python, target->unbuffered, std::move(env), plan.preload, plan.run_dir);
  if (!warm) {
    say(console, "--preload: the warm interpreter could not start (" + warm.error().message +
                     "); the ranks start fresh");
    return nullptr;
  }
  return std::move(*warm);
}

} // namespace

RunOutcome run_attempts(LaunchPlan& plan, const ConsoleOptions& console, SupervisorHooks* supervisor_hooks,
                        AttemptHooks& attempt_hooks) {
  // Only these two of the first attempt's plan are read after it has run;
  // the plan itself (every rank's environment) is copied only for a restart.
  const std::optional<std::chrono::milliseconds> first_timeout = plan.timeout;
  const int max_restarts = plan.max_restarts;
  // What each restart is planned from: the first attempt's plan, or its
  // regrouped form. Taken at the first restart: until then `plan` differs
  // from it only by choose_resume_point, which every attempt redoes.
  std::optional<LaunchPlan> base;
  const auto started = Clock::now();
  const auto started_wall = std::chrono::system_clock::now();
  std::vector<AttemptRecord> earlier; // every attempt that ended before this one
  RunOutcome outcome;
  // One warm interpreter for every attempt (--preload): its imports run
  // once, and each restart forks the ranks from it.
  const std::unique_ptr<WarmStart> warm = start_warm_interpreter(plan, console);
  // Restarts after a failure, which --max-restarts limits; a restart to admit
  // a node that joined is not one (torchrun's agent does not count those either).
  int restarts_used = 0;
  // An agent that joined a running job starts at the attempt the others are in.
  const int first_attempt = plan.attempt;
  for (int attempt = plan.attempt;; ++attempt) {
    // Every attempt, the first included (a requeued job is a new launch),
    // starts from the newest complete checkpoint there is now.
    choose_resume_point(plan);
    if (!plan.resume_from.empty())
      say(console, fmt::format("attempt {} resumes from {} (AIR_RESUME_FROM)", attempt, plan.resume_from));
    // With CPUs to spare, the first attempt starts fresh while the interpreter
    // imports beside it (core/warm/warm_choice.hpp); restarts fork from it.
    const bool forks = attempt != first_attempt || plan.preload_first_attempt;
    RunTimeline timeline_so_far = std::move(outcome.timeline);
    outcome = supervise(plan, console, supervisor_hooks, forks ? warm.get() : nullptr);
    outcome.timeline.prepend(timeline_so_far);
    // Every rank has stopped: what they saved is what a new launch resumes
    // from, however the run ended (a Ctrl-C too, not only a preemption).
    if (!plan.checkpoint_dir.empty())
      outcome.checkpoint = latest_checkpoint(plan.checkpoint_dir).value_or("");
    if (outcome.preemption) outcome.preemption->checkpoint = outcome.checkpoint;
    if (attempt > 0 && outcome.status == RunOutcome::Status::timed_out && first_timeout) {
      outcome.reason = fmt::format("timed out after {} (the whole run, {} attempts)",
                                   format_duration(*first_timeout), attempt + 1);
    }
    const bool membership_change = outcome.remote_failure && outcome.remote_failure->membership_change;
    if (!membership_change && restarts_used >= max_restarts) break;
    const auto port = attempt_hooks.next_attempt(outcome, attempt + 1, restartable_outcome(outcome));
    if (!port) break;
    if (!membership_change) ++restarts_used;

    AttemptRecord record = attempt_record(plan, outcome);
    attempt_hooks.record_attempt(plan, outcome, record);
    clear_rank_files(plan);
    // A Ctrl-C or SIGTERM that came while the group was being torn down ends the run here.
    if (auto watch = InterruptWatch::open()) {
      if (const int sig = watch->take(); sig != 0) {
        outcome.status = RunOutcome::Status::interrupted;
        outcome.interrupt_signal = sig;
        outcome.reason = fmt::format("interrupted by {} before restart {}", signal_name(sig), attempt + 1);
        break;
      }
    }
    std::optional<std::chrono::milliseconds> left;
    if (first_timeout) {
      left = *first_timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
      if (left->count() <= 0) {
        outcome.status = RunOutcome::Status::timed_out;
        outcome.reason = fmt::format("timed out after {} (the whole run, before restart {})",
                                     format_duration(*first_timeout), attempt + 1);
        break;
      }
    }
    earlier.push_back(std::move(record));
    // Attempts are numbered from 0 everywhere (TORCHELASTIC_RESTART_COUNT, log
    // files, the report and the summary): the restart that starts attempt N is restart N.
    if (membership_change) {
      say(console, fmt::format("restarting the worker group: attempt {} (TORCHELASTIC_RESTART_COUNT={}, "
                               "MASTER_PORT={}; a membership change, not counted against --max-restarts) "
                               "after {}",
                               attempt + 1, attempt + 1, *port, outcome.reason));
    } else {
      say(console, fmt::format("restarting the worker group: attempt {} (restart {} of {}, "
                               "TORCHELASTIC_RESTART_COUNT={}, MASTER_PORT={}) after {}",
                               attempt + 1, restarts_used, max_restarts, attempt + 1, *port, outcome.reason));
    }
    if (!base) base = plan;
    if (auto regrouped = attempt_hooks.regroup(*base)) base = std::move(*regrouped);
    plan = plan_for_attempt(*base, attempt + 1, *port, left);
  }
  AttemptRecord last = attempt_record(plan, outcome);
  attempt_hooks.record_attempt(plan, outcome, last);
  earlier.push_back(std::move(last));
  outcome.attempts = std::move(earlier);
  outcome.started_at = started_wall;
  outcome.duration_s = std::chrono::duration<double>(Clock::now() - started).count();
  return outcome;
}

} // namespace air
