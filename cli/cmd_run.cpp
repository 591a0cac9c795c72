#include "cli/app.hpp"
#include "cli/attempt_hooks.hpp"
#include "cli/commands.hpp"
#include "cli/console_setup.hpp"
#include "cli/dry_run.hpp"
#include "cli/launch_checks.hpp"
#include "cli/nodes.hpp"
#include "cli/output_paths.hpp"
#include "cli/run_dir_guard.hpp"
#include "cli/write_reports.hpp"
#include "core/base/phase_clock.hpp"
#include "core/base/speaker.hpp"
#include "core/hw/hardware.hpp"
#include "core/mlflow/rank_wait.hpp"
#include "core/mlflow/settings.hpp"
#include "core/mlflow/tracker.hpp"
#include "core/os/atomic_file.hpp"
#include "core/os/host.hpp"
#include "core/os/output_file.hpp"
#include "core/os/run_folder.hpp"
#include "core/os/signals.hpp"
#include "core/os/trusted_path.hpp"
#include "core/pyenv/cache.hpp"
#include "core/run/attempts.hpp"
#include "core/run/console_style.hpp"
#include "core/run/plan.hpp"
#include "core/run/resume.hpp"
#include "core/run/stacks.hpp"
#include "core/run/supervisor.hpp"
#include "core/spec/ignored_settings.hpp"
#include "core/spec/path_template.hpp"
#include "core/spec/spec.hpp"
#include "core/spec/spec_paths.hpp"
#include "core/spec/torchrun.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <utility>

namespace air::cli {

namespace {

void print_lines(const std::vector<std::string>& lines, std::FILE* to) {
  for (const auto& line : lines) std::fputs(said(line + "\n").c_str(), to);
}

/// How air-run's own notices reach stderr: dimmed on a colour terminal (they
/// are there to be read when needed), not at all under -q.
struct Notices {
  bool quiet = false;
  bool color = false;
  void print(const std::string& line) const {
    if (!quiet) std::fputs(paint(said(line + "\n"), Paint::dim, color).c_str(), stderr);
  }
};

/// Writes the sitecustomize.py that arms faulthandler in Python ranks, when the plan arms them;
/// with the MLflow run's wait, which run/ cannot name (mlflow/ is above it).
Status write_stack_shim(const LaunchPlan& plan) {
  if (plan.stack_signal <= 0) return ok_status();
  AIR_TRY(make_directories(plan.stack_shim_dir));
  AIR_TRY(write_file_atomically(plan.stack_shim_dir + "/" + std::string(k_stack_shim_body_name),
                                stack_shim_source({mlflow_rank_wait_part()})));
  return write_file_atomically(plan.stack_shim_dir + "/" + std::string(k_stack_shim_name),
                               std::string(stack_shim_loader_source()));
}

/// The spec's report paths when the spec file itself was refused: the flags
/// and AIR_RUN_* variables alone, so that `--junit`/`--summary` given on the
/// command line still get their report.
std::optional<LaunchSpec> spec_from_flags_only(const CliOptions& options, const Environment& env) {
  CliOptions flags_only = options;
  flags_only.spec_file.clear();
  auto resolved = resolve_cli_spec(flags_only, env);
  if (!resolved) return std::nullopt;
  resolved->spec.spec_path = options.spec_file == "-" ? std::string(k_stdin_spec_name)
                                                      : options.spec_file; // the job keeps its name in CI
  return std::move(resolved->spec);
}

/// One launch, from the spec to the end of the run, in the manner of ninja's
/// RealMain: the state one step leaves for the next, and a method a step,
/// called in order by run(). A step answers go_on() or the exit code the
/// launch ends with (0 after --dry-run, 128+N after a signal); an error is a
/// refused launch. `facts` follows the launch so that a refusal can still be
/// reported (see run_command).
class Launch {
public:
  Launch(const CliOptions& options, const Environment& env, LaunchFacts& facts)
      : options_(options), env_(env), facts_(facts) {}

  /// Every step in turn, then the run itself. Returns the run's exit code.
  Expected<int> run() {
    using StepMethod = Step (Launch::*)();
    static constexpr std::pair<const char*, StepMethod> k_steps[] = {{"resolve", &Launch::resolve},
                                                                     {"tracker", &Launch::create_tracker},
                                                                     {"hardware", &Launch::select_hardware},
                                                                     {"python", &Launch::prepare_python},
                                                                     {"nodes", &Launch::place_on_nodes},
                                                                     {"dry-run", &Launch::dry_run},
                                                                     {"tracking", &Launch::begin_tracking},
                                                                     {"join", &Launch::join_nodes},
                                                                     {"checks", &Launch::check_before_launch},
                                                                     {"run-dirs", &Launch::prepare_run_dirs},
                                                                     {"plan", &Launch::make_the_plan},
                                                                     {"ready", &Launch::ready_the_ranks}};
    for (const auto& [name, step] : k_steps) {
      auto stop = (this->*step)();
      phases::mark(name); // AIR_RUN_PHASES=1: each step's time
      // Once the nodes have joined, a failure is told to the others and to MLflow too.
      if (!stop) return joined_ ? setup_failed(stop.error()) : stop.error();
      if (*stop) return **stop;
    }
    return supervise();
  }

private:
  /// A step's answer: nullopt to go on, or the exit code the launch ends with.
  using Step = Expected<std::optional<int>>;
  static Step go_on() { return std::optional<int>(); }
  static Step end_with(int code) { return std::optional<int>(code); }

  /// The spec from its file, variables and flags; the spec file's relative
  /// paths, the checkpoint folder, MLflow's standard variables as defaults; a
  /// target to run, and report paths whose placeholders are known.
  Step resolve() {
    auto resolved = resolve_cli_spec(options_, env_);
    if (!resolved) {
      facts_.spec = spec_from_flags_only(options_, env_);
      return resolved.error();
    }
    spec_ = std::move(resolved->spec);
    // --nnodes/--node-rank are known now (Slurm's nodes once placed, c10d's after the join).
    if (spec_.nnodes.value > 1 && spec_.node_rank.value >= 0 && spec_.node_rank.value < spec_.nnodes.value &&
        spec_.rdzv_backend.value != "c10d")
      set_console_node(spec_.node_rank.value, spec_.nnodes.value);
    for (const auto& warning : resolved->warnings) say_on_stderr(warning + "\n");
    anchor_spec_paths(spec_); // relative paths of the spec file: relative to it
    if (auto dir = prepare_checkpoint_dir(spec_.checkpoint_dir, !options_.dry_run); !dir) {
      facts_.spec = spec_;
      return dir.error();
    }
    mlflow::apply_standard_variables(spec_, env_); // MLFLOW_TRACKING_URI & co. as defaults
    facts_.spec = spec_;
    facts_.spec_resolved = true;
    if (spec_.command.value.empty()) {
      return usage_error(
          "no target given: use `air-run [options] TARGET [ARGS...]` or `command:` in the spec");
    }
    auto paths = PathTemplates::of(spec_);
    if (!paths) {
      facts_.spec.reset(); // the report paths themselves are wrong
      return paths.error();
    }
    paths_ = std::move(*paths);
    return go_on();
  }

  /// The hardware and the ranks on it; then the run's time limit, said first.
  Step select_hardware() {
    hardware_ = hardware_for(spec_, env_);
    facts_.hardware = hardware_;
    auto selection = select_ranks(spec_, hardware_);
    if (!selection) return selection.error();
    selection_ = std::move(*selection);
    notices_ = Notices{spec_.quiet.value, use_color(::isatty(STDERR_FILENO) == 1, env_)};
    // Before anything else about the run (an environment build, the nodes'
    // join): a multi-day job must not learn of its limit from an exit code 124.
    // Not for a run that cannot start (a missing script): its error comes alone.
    if (!options_.dry_run && spec_.timeout.value && check_target(spec_, env_, /*check_python=*/false)) {
      notices_.print(fmt::format("air-run: this run stops after {} (timeout, {}); --timeout none lifts it",
                                 format_duration(*spec_.timeout.value), spec_.timeout.origin.describe()));
    }
    return go_on();
  }

  /// environment.dependencies: every rank runs in one cached virtual
  /// environment. It is built here, before anything is launched and before the
  /// nodes join (a pip install would outlast the control connection's heartbeats).
  Step prepare_python() {
    spec_lines_ = describe_spec(spec_); // as the user gave it
    auto python_env = prepare_python_env(spec_, env_, options_.dry_run);
    if (!python_env) return python_env.error();
    if (python_env->interrupted_by != 0) return end_with(128 + python_env->interrupted_by);
    python_env_ = std::move(*python_env);
    facts_.python_env = python_env_;
    if (python_env_.active) {
      spec_.python.value = python_env_.python;
      for (const auto& [name, value] : python_env_.vars) spec_.env.value[name] = value;
      // The store's helper runs with the environment's interpreter, known only now.
      if (tracker_ != nullptr) return create_tracker();
    }
    return go_on();
  }

  /// MLflow (core/mlflow/): no tracker without a tracking URI; then no MLflow
  /// code runs. Made first, right after the spec: a file or database store's
  /// helper (which imports mlflow for seconds) starts here, so that its start
  /// overlaps everything else the launch does. Where an environment is still
  /// to be prepared, its interpreter runs the helper: made again after it.
  Step create_tracker() {
    auto tracker = mlflow::Tracker::create(spec_, env_);
    if (!tracker) return tracker.error();
    tracker_ = std::move(*tracker);
    const bool environment_to_prepare =
        !spec_.dependencies.value.empty() || !spec_.requirements_file.value.empty();
    if (tracker_ != nullptr && !options_.dry_run && (!environment_to_prepare || python_env_.active))
      tracker_->warm_up();
    return go_on();
  }

  /// This node among the nodes (cli/nodes.cpp: Slurm or --nnodes/--node-rank,
  /// which decides the master port), the run id, and what follows from them:
  /// the NUMA topology when asked for, the paths, the run folder.
  Step place_on_nodes() {
    auto cluster = resolve_cluster(spec_, env_, options_.dry_run);
    if (!cluster) return cluster.error();
    cluster_ = std::move(*cluster);
    if (cluster_.multi_node() && cluster_.node_rank >= 0)
      set_console_node(cluster_.node_rank, cluster_.num_nodes);
    show_placement_in_dry_run();
    ctx_.run_id = spec_.run_id.value.empty() ? make_run_id() : spec_.run_id.value;
    ctx_.master_port = cluster_.master_port;
    ctx_.node_rank = std::max(0, cluster_.node_rank); // c10d: -1 until the join (a dry run shows node 0)
    ctx_.num_nodes = cluster_.num_nodes;
    ctx_.node_name = cluster_.node_name;
    ctx_.cluster_source = cluster_.source;
    if (spec_.numa_binding.value != "none") {
      // --numa-binding: the machine's CPUs and each GPU's NUMA node, for the pure planner.
      auto topology = read_cpu_topology();
      if (!topology) return topology.error();
      ctx_.topology = std::move(*topology);
      for (const auto& gpu : selection_.gpus) ctx_.gpu_numa_nodes.push_back(pci_numa_node(gpu.pci_bus_id));
    }
    // The warm start (--preload): reads the target's imports and air-run's CPUs.
    ctx_.warm =
        choose_warm_start(spec_, selection_.ranks, usable_cpu_count(),
                          preload_is_auto(spec_) ? find_torch_import(spec_, env_) : std::nullopt,
                          spec_.preload.value.empty() ? std::nullopt : find_import_time_setting(spec_, env_));
    paths_.apply(spec_, ctx_.run_id, ctx_.node_rank);
    facts_.run_id = ctx_.run_id;
    facts_.node_rank = ctx_.node_rank;
    // Result and error files live in the log directory when there is one (kept),
    // else (also when each rank has its own log folder) in a private temporary
    // directory removed after the report.
    keep_run_dir_ = !spec_.log_dir.value.empty() && spec_.log_dir.value.find("{rank}") == std::string::npos;
    ctx_.run_dir = keep_run_dir_ ? spec_.log_dir.value : fmt::format("/tmp/air-run-{}", ctx_.run_id);
    return go_on();
  }

  /// The dry run's spec lines were taken as the user gave the spec, before
  /// Slurm's variables (or KillWait) placed this node: the lines of the
  /// settings the placement derived show their values and origins now
  /// (`nnodes = 2  (env SLURM_STEP_NUM_NODES)`).
  void show_placement_in_dry_run() {
    const std::vector<std::string> placed = describe_spec(spec_);
    if (placed.size() != spec_lines_.size()) return;
    for (std::size_t i = 0; i < placed.size(); ++i) {
      for (const char* key : {"nnodes = ", "node_rank = ", "master_addr = ", "master_port = ", "run_id = ",
                              "grace_period = "}) {
        if (placed[i].rfind(key, 0) == 0) spec_lines_[i] = placed[i];
      }
    }
  }

  /// --dry-run: the plan and what a launch checks before its first rank (so a
  /// dry run fails the same way), printed (cli/dry_run.hpp) instead of run.
  Step dry_run() {
    if (!options_.dry_run) return go_on();
    auto plan = make_plan(spec_, selection_, env_, ctx_);
    if (!plan) return plan.error();
    choose_resume_point(*plan); // what the first attempt would resume from now
    print_lines(ignored_settings_warnings(spec_, plan->world_size, plan->ranks_per_node), stderr);
    const bool env_to_build = python_env_.active && ::access(python_env_.python.c_str(), X_OK) != 0;
    if (auto target = check_target(spec_, env_, !env_to_build); !target) return target.error();
    if (auto ok = check_writable_outputs(spec_, false, facts_); !ok) return ok.error();
    print_dry_run(spec_lines_, hardware_, selection_, python_env_.active ? &python_env_ : nullptr,
                  tracker_.get(), *plan);
    return end_with(0);
  }

  /// Node 0 creates the MLflow run. Python ranks wait for it themselves (in
  /// the shim), so for them it is created while the launch goes on (a
  /// tracking server: on a thread of its own). Everything else waits for it
  /// before going on, as before: the nodes' join (they get its id with
  /// `start`), a required run (one that cannot be created fails the launch
  /// once the nodes have joined, below), and ranks that are no Python
  /// programs or are forked by --preload in the first attempt (they get it
  /// in their environment).
  /// (Creating it on a thread for those too was measured against a real
  /// MLflow 2.17 server on the busy 2-core machine: 20 to 30 ms slower, the
  /// thread's work competing with the launch's own for the cores.)
  Step begin_tracking() {
    for (const auto& line : cluster_.notices) notices_.print(line);
    if (tracker_ == nullptr || ctx_.node_rank != 0) return go_on();
    const bool first_forks = !ctx_.warm.modules.empty() && ctx_.warm.first_attempt;
    const bool ranks_wait =
        runs_python_target(spec_) && !first_forks && !cluster_.multi_node() && !tracker_->config().required;
    tracker_->begin(mlflow::gather_launch_facts(spec_, selection_, ctx_.num_nodes, ctx_.run_id, env_),
                    ranks_wait);
    return ranks_wait ? go_on() : settle_tracking();
  }

  /// Waits for the MLflow run being created; its error waits in `tracking_`
  /// for the end of the join. A signal ends the wait and the launch (128+N).
  Step settle_tracking() {
    tracking_ = tracker_->settle();
    if (const int sig = tracker_->interrupted_by(); sig != 0) {
      tracker_->abandon(RunOutcome::Status::interrupted, 128 + sig); // when the run exists already
      return end_with(128 + sig);
    }
    return go_on();
  }

  /// Several nodes: wait for all of them (node 0's run id wins); from here on a
  /// failure before launch is told to the other nodes so they stop too. Ctrl-C
  /// and SIGTERM end the wait (exit 128+N), as they end a run.
  Step join_nodes() {
    if (cluster_.multi_node()) {
      auto watch = InterruptWatch::open();
      if (!watch) return watch.error();
      interrupts_ = std::move(*watch);
    }
    int interrupted_by = 0;
    const int interrupt_fd = interrupts_ ? interrupts_->fd() : -1;
    auto control =
        tracker_ != nullptr && cluster_.multi_node() && tracker_->has_run()
            ? join_cluster(cluster_, selection_.ranks, ctx_.run_id, env_, interrupt_fd, &interrupted_by,
                           tracker_->run().experiment_id, tracker_->run().run_id)
            : join_cluster(cluster_, selection_.ranks, ctx_.run_id, env_, interrupt_fd, &interrupted_by);
    if (!control) {
      end_tracking(control.error());
      if (interrupted_by == 0) return control.error();
      say_on_stderr(fmt::format("air-run: {}\n", control.error().message));
      return end_with(128 + interrupted_by);
    }
    control_ = std::move(*control);
    channel_ = control_.get();
    joined_ = true;
    if (channel_ != nullptr) adopt_join();
    return go_on();
  }

  /// What the join gave this node: the run id every node uses, under c10d its
  /// rank, the node count (MIN:MAX) and node 0's master port, and on the
  /// other nodes node 0's MLflow run.
  void adopt_join() {
    ctx_.run_id = channel_->run_id();
    if (cluster_.c10d) {
      cluster_.node_rank = channel_->node_rank();
      cluster_.num_nodes = channel_->num_nodes();
      cluster_.master_port = channel_->master_port();
      ctx_.node_rank = cluster_.node_rank;
      ctx_.num_nodes = cluster_.num_nodes;
      ctx_.master_port = cluster_.master_port;
    }
    if (tracker_ != nullptr && ctx_.node_rank != 0)
      tracker_->adopt(channel_->mlflow_experiment_id(), channel_->mlflow_run_id());
    paths_.apply(spec_, ctx_.run_id, ctx_.node_rank);
    facts_.run_id = ctx_.run_id;
    facts_.node_rank = ctx_.node_rank;
    set_console_node(cluster_.node_rank, cluster_.num_nodes); // c10d: the rank node 0 handed out
    if (keep_run_dir_) ctx_.run_dir = spec_.log_dir.value;
    notices_.print(fmt::format("air-run: {}", describe_cluster(cluster_, selection_.ranks)));
  }

  /// What must hold before the first rank: the MLflow run a required run
  /// needs, the target, the report paths, and a log folder no other run wrote
  /// (a run id used before, or by a run going on now, must not cost that run its logs).
  Step check_before_launch() {
    if (!tracking_) return tracking_.error();
    if (auto target = check_target(spec_, env_); !target) return target.error();
    if (auto ok = check_writable_outputs(spec_, true, facts_); !ok) return ok.error();
    const std::string wanted_folder = run_folder_of(spec_.log_dir.value);
    auto log_folder = claim_log_folder(spec_, ctx_.node_rank);
    if (!log_folder) return log_folder.error();
    if (*log_folder != wanted_folder) {
      notices_.print(
          fmt::format("air-run: {} holds the logs of another run with run id {}; this run's logs go to {}",
                      wanted_folder, ctx_.run_id, *log_folder));
    }
    return go_on();
  }

  /// The folder of the ranks' result and error files: the log directory when
  /// kept, else a private one that run_dir_guard_ removes; torchrun's -r/-t folder.
  Step prepare_run_dirs() {
    if (keep_run_dir_) {
      ctx_.run_dir = spec_.log_dir.value;
      // Reports are read back from here: a directory another user can write
      // into could feed them a planted result or a symlink to our secrets.
      if (auto trusted = check_trusted_path(ctx_.run_dir, "log directory"); !trusted) return trusted.error();
    } else {
      auto dir = make_private_run_dir(env_, ctx_.run_id);
      if (!dir) return dir.error();
      ctx_.run_dir = *dir;
      ctx_.run_dir_is_temporary = true;
      run_dir_guard_.own(*dir);
    }
    auto torchrun_dir =
        make_torchrun_log_dir(spec_, paths_.torchrun_base(ctx_.run_id, ctx_.node_rank), env_, ctx_.run_id);
    if (!torchrun_dir) return torchrun_dir.error();
    ctx_.torchrun_log_dir = *torchrun_dir;
    if (!ctx_.torchrun_log_dir.empty()) {
      say_on_stderr(
          fmt::format("air-run: rank output files (--redirects/--tee) in {}\n", ctx_.torchrun_log_dir));
    }
    return go_on();
  }

  /// The plan of every rank, with no file of an earlier run left where this
  /// run's ranks write theirs.
  Step make_the_plan() {
    // A spare real-time signal arms faulthandler in Python ranks (core/run/stacks.hpp).
    ctx_.stack_signal = SIGRTMIN + 3;
    ctx_.python_package_dir = find_python_package_dir(env_);
    auto plan = make_plan(spec_, selection_, env_, ctx_);
    if (!plan) return plan.error();
    plan_ = std::move(*plan);
    if (keep_run_dir_) {
      // A reused log directory still holds the previous run's files: a rank of
      // this run that writes none must not be reported with the old ones.
      for (const auto& rank : plan_->ranks) {
        for (const auto& [path, what] :
             {std::pair{rank.result_file, "result file"}, {rank.error_file, "error file"}}) {
          if (auto removed = remove_stale_file(path, what); !removed) return removed.error();
        }
      }
    }
    print_lines(ignored_settings_warnings(spec_, plan_->world_size, plan_->ranks_per_node), stderr);
    return go_on();
  }

  /// What the ranks need before they start: the MLflow run in their
  /// environment, the stack shim, the rank that reads stdin; then the notices.
  Step ready_the_ranks() {
    if (tracker_ != nullptr) {
      if (!mlflow::Tracker::ranks_can_wait(*plan_)) {
        if (auto stop = settle_tracking(); !stop || *stop) return stop;
      }
      tracker_->add_rank_environment(*plan_);
    }
    if (auto shim = write_stack_shim(*plan_); !shim) return shim.error();
    auto stdin_rank = stdin_rank_for(spec_, *plan_);
    if (!stdin_rank) return stdin_rank.error();
    stdin_rank_ = *stdin_rank;
    for (const auto& notice : selection_.notices) notices_.print(fmt::format("air-run: {}", notice));
    for (const auto& notice : plan_->notices) notices_.print(fmt::format("air-run: {}", notice));
    for (int stream = 0; stream < 2; ++stream) {
      if (plan_->filtered_files[stream].empty()) continue;
      notices_.print(fmt::format("air-run: {} lines matching --duplicate-{}-filters also go to {}",
                                 stream == 0 ? "stdout" : "stderr", stream == 0 ? "stdout" : "stderr",
                                 plan_->filtered_files[stream]));
    }
    return go_on();
  }

  /// The run: its attempts (once, or more with --max-restarts), the end every
  /// node agrees on, and the report. Returns air-run's exit code.
  int supervise() {
    ConsoleOptions console = console_options_for(spec_, *plan_, hardware_, stdin_rank_, env_);
    std::fflush(stdout);
    std::fflush(stderr);
    // An agent that joined a running job starts in the attempt node 0 restarted the group in.
    if (channel_ != nullptr && channel_->first_attempt() > 0)
      *plan_ = plan_for_attempt(*plan_, channel_->first_attempt(), plan_->master_port, plan_->timeout);
    CliAttemptHooks attempt_hooks(channel_, plan_->master_addr);
    // A node lost under --nnodes MIN:MAX: the survivors plan their groups again.
    attempt_hooks.set_replanner([this](int node_rank, int num_nodes) -> Expected<LaunchPlan> {
      PlanContext regrouped = ctx_;
      regrouped.node_rank = node_rank;
      regrouped.num_nodes = num_nodes;
      auto next = make_plan(spec_, selection_, env_, regrouped);
      if (next && tracker_ != nullptr) tracker_->add_rank_environment(*next);
      return next;
    });
    RunOutcome outcome = run_attempts(*plan_, console, channel_, attempt_hooks);
    if (channel_ != nullptr) channel_->finish(outcome); // every node agrees on the end (and its exit code)
    requeue_after_warning(cluster_, outcome, env_);     // after Slurm's warning: the next run resumes
    const int code = report_run(spec_, hardware_, selection_, *plan_, outcome, env_, tracker_.get(),
                                python_env_.active ? &python_env_ : nullptr);
    phases::mark("report");
    return code;
  }

  /// Node 0's MLflow run ends as launch_failed, with the exit code `error` gives.
  void end_tracking(const Error& error) {
    if (tracker_ != nullptr && ctx_.node_rank == 0)
      tracker_->abandon(RunOutcome::Status::launch_failed, exit_code_for(error.kind));
  }

  /// A failure once the nodes have joined: the other nodes stop with its exit code, MLflow's run ends.
  Error setup_failed(Error error) {
    report_setup_failure(channel_, error);
    end_tracking(error);
    return error;
  }

  const CliOptions& options_;
  const Environment& env_;
  LaunchFacts& facts_;
  LaunchSpec spec_;
  PathTemplates paths_;
  Hardware hardware_;
  Selection selection_;
  Notices notices_;
  std::vector<std::string> spec_lines_; ///< the spec as the user gave it, for --dry-run
  PreparedEnv python_env_;
  std::unique_ptr<mlflow::Tracker> tracker_; ///< nullptr without a tracking URI
  Status tracking_ = ok_status();            ///< how node 0's MLflow run was created
  ClusterContext cluster_;
  PlanContext ctx_;
  bool keep_run_dir_ = false; ///< the run folder is the log directory, kept after the run
  std::optional<InterruptWatch> interrupts_;
  std::unique_ptr<ControlChannel> control_;
  ControlChannel* channel_ = nullptr; ///< nullptr on one node
  bool joined_ = false;               ///< the join is over: failures are told to the other nodes
  std::optional<LaunchPlan> plan_;
  int stdin_rank_ = -1;
  RunDirGuard run_dir_guard_; ///< last: the private run folder goes first, after the report
};

/// Everything from the spec to the end of the run.
Expected<int> launch_run(const CliOptions& options, const Environment& env, LaunchFacts& facts) {
  Launch launch(options, env, facts);
  return launch.run();
}

} // namespace

Expected<int> run_command(const CliOptions& options) {
  const Environment env = current_environment();
  LaunchFacts facts;
  auto code = launch_run(options, env, facts);
  phases::mark("cleanup"); // the private run folder removed, the tracker ended
  // Every error reaching here was met before any rank started: the launch was refused.
  if (!code) report_refused_launch(facts, code.error(), exit_code_for(code.error().kind), env);
  return code;
}

} // namespace air::cli
