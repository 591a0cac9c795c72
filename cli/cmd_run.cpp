#include "cli/app.hpp"
#include "cli/attempt_hooks.hpp"
#include "cli/commands.hpp"
#include "cli/nodes.hpp"
#include "cli/output_paths.hpp"
#include "cli/write_reports.hpp"
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

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <utility>

namespace air::cli {

namespace {

void print_lines(const std::vector<std::string>& lines, std::FILE* to) {
  for (const auto& line : lines) std::fputs((line + "\n").c_str(), to);
}

/// How air-run's own notices reach stderr: dimmed on a colour terminal (they
/// are there to be read when needed), not at all under -q.
struct Notices {
  bool quiet = false;
  bool color = false;
  void print(const std::string& line) const {
    if (!quiet) std::fputs(paint(line + "\n", Paint::dim, color).c_str(), stderr);
  }
};

/// Fails before launch when the target cannot start, so a typo costs no ranks:
/// the interpreter or executable must resolve, a script must be readable.
/// `check_python` is false for a dry run whose environment a launch would
/// build first: its interpreter does not exist yet, and that is no error.
Status check_target(const LaunchSpec& spec, const Environment& env, bool check_python = true) {
  const auto& command = spec.command.value;
  const bool python_target = !spec.no_python.value && (spec.module.value || command.front().ends_with(".py"));
  if (python_target && !check_python) {
    if (!spec.module.value) return check_readable_file(command.front(), "script");
    return ok_status();
  }
  if (python_target) {
    auto python = check_executable(spec.python.value, env);
    if (!python) {
      return Error{python.error().kind,
                   fmt::format("Python interpreter {} (environment.python)", python.error().message)};
    }
    if (!spec.module.value) return check_readable_file(command.front(), "script");
    return ok_status();
  }
  auto exe = check_executable(command.front(), env);
  if (!exe) return exe.error();
  return ok_status();
}

std::optional<std::string> requested_type(const LaunchSpec& spec) {
  if (spec.accelerator_type.value.empty()) return std::nullopt;
  return spec.accelerator_type.value;
}

/// The hardware a run is matched against. A run that asks for CPU ranks skips
/// the GPU probe: loading NVML costs tens of milliseconds and about 18 MiB of
/// resident memory on a GPU machine, for a run that uses no GPU.
Hardware hardware_for(const LaunchSpec& spec, const Environment& env) {
  const auto type = requested_type(spec);
  if (!type) return detect_hardware(env);
  const auto parsed = parse_accelerator_type(*type);
  if (!parsed || !parsed->cpu) return detect_hardware(env); // a bad type is reported by the selection
  Hardware skipped;
  skipped.source = "skipped";
  skipped.reason = "accelerator_type is CPU: GPUs not probed";
  return skipped;
}

/// The ranks and GPUs: torchrun's --nproc-per-node when given (more ranks
/// than GPUs allowed), else air-run's strict accelerator matching.
Expected<Selection> select_ranks(const LaunchSpec& spec, const Hardware& hardware) {
  if (spec.nproc_per_node.value.empty()) {
    return select_accelerators(requested_type(spec), spec.num_accelerators.value, spec.cpu_ranks.value,
                               hardware, !spec.cpu_ranks.is_default());
  }
  auto nproc = parse_nproc_per_node(spec.nproc_per_node.value, "nproc_per_node");
  if (!nproc) return nproc.error();
  // os.cpu_count(), as torchrun counts: every online CPU, not the affinity mask.
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return select_nproc_per_node(*nproc, requested_type(spec), hardware, cpus > 0 ? static_cast<int>(cpus) : 1);
}

/// The run's own folder inside the log directory: the log directory itself,
/// or the part before the per-rank folder of `logs/<run id>/{rank}`. "" when
/// there is none (no --log-dir, or `{rank}` in the first path segment).
std::string run_folder_of(const std::string& log_dir) {
  const auto rank = log_dir.find("{rank}");
  if (rank == std::string::npos) return log_dir;
  const auto slash = log_dir.rfind('/', rank);
  return slash == std::string::npos || slash == 0 ? std::string() : log_dir.substr(0, slash);
}

/// torchrun's per-run log directory for -r/-t files, made when either is
/// set: `<log_dir>/<run_id>_XXXXXX` (a temporary base when log_dir is unset).
Expected<std::string> make_torchrun_log_dir(const LaunchSpec& spec, const Environment& env,
                                            const std::string& run_id) {
  if (spec.redirects.value == "0" && spec.tee.value == "0" && spec.duplicate_stdout_filters.value.empty() &&
      spec.duplicate_stderr_filters.value.empty())
    return std::string();
  // The run's folder: with a folder per rank (`logs/{run_id}/{rank}`), the one above them.
  std::string base = run_folder_of(spec.log_dir.value);
  if (base.empty()) base = fmt::format("{}/torchelastic_{}", env_or(env, "TMPDIR", "/tmp"), run_id);
  AIR_TRY(make_directories(base));
  std::string path = fmt::format("{}/{}_XXXXXX", base, run_id);
  if (mkdtemp(path.data()) == nullptr) {
    return Error{ErrorKind::system, fmt::format("mkdtemp {}: {}", path, std::strerror(errno))};
  }
  return path;
}

/// The paths a run writes, as given (with placeholders), and their check:
/// an unknown placeholder is a usage error before anything starts.
struct PathTemplates {
  std::string log_dir, summary_file, junit_file;

  static Expected<PathTemplates> of(const LaunchSpec& spec) {
    AIR_TRY(check_placeholders(spec.log_dir.value, {"run_id", "node_rank", "rank"}, "log_dir (--log-dir)"));
    AIR_TRY(check_placeholders(spec.summary_file.value, {"run_id", "node_rank"}, "summary_file (--summary)"));
    AIR_TRY(check_placeholders(spec.junit_file.value, {"run_id", "node_rank"}, "junit_file (--junit)"));
    // A per-run subfolder by default: a second run never overwrites the first.
    return PathTemplates{with_run_folder(spec.log_dir.value), spec.summary_file.value, spec.junit_file.value};
  }

  /// Puts the run's values into the spec's paths ({rank} stays for the planner).
  void apply(LaunchSpec& spec, const std::string& run_id, int node_rank) const {
    spec.log_dir.value = fill_run_placeholders(log_dir, run_id, node_rank);
    spec.summary_file.value = fill_run_placeholders(summary_file, run_id, node_rank);
    spec.junit_file.value = fill_run_placeholders(junit_file, run_id, node_rank);
  }
};

/// Takes this node's log folder for the run (core/os/run_folder.hpp): when an
/// earlier or concurrent run with the same run id holds it, this run's logs
/// go to `<folder>.1` (`.2`, ...) instead, and `spec.log_dir` says so.
/// Returns the folder taken ("" without one).
Expected<std::string> claim_log_folder(LaunchSpec& spec, int node_rank) {
  const std::string folder = run_folder_of(spec.log_dir.value);
  if (folder.empty()) return std::string();
  // The run's folder is made inside the directory the user named: that one
  // must not be open to other users either (checked before anything is made in it).
  const std::string parent = std::filesystem::path(folder).parent_path().string();
  if (struct stat st{}; !parent.empty() && ::stat(parent.c_str(), &st) == 0)
    AIR_TRY(check_trusted_path(parent, "log directory"));
  auto claimed = claim_run_folder(folder, node_rank);
  if (!claimed) return claimed.error();
  if (*claimed != folder) spec.log_dir.value = *claimed + spec.log_dir.value.substr(folder.size());
  return claimed;
}

/// The output paths' check (cli/output_paths.hpp); a refused path is dropped
/// from the refused launch's report, which would only fail on it again.
Status check_writable_outputs(const LaunchSpec& spec, bool create, LaunchFacts& facts) {
  std::string refused_key;
  auto ok = check_output_paths(spec, create, &refused_key);
  if (!ok && facts.spec) {
    if (refused_key == "summary_file") facts.spec->summary_file.value.clear();
    if (refused_key == "junit_file") facts.spec->junit_file.value.clear();
  }
  return ok;
}

/// The GPUs the run's ranks use, in detection order, for the live status area.
std::vector<LiveGpuSource> live_gpus(const Hardware& hardware, const LaunchPlan& plan) {
  std::vector<LiveGpuSource> out;
  for (const auto& gpu : hardware.gpus) {
    const bool used = std::any_of(plan.ranks.begin(), plan.ranks.end(),
                                  [&](const RankPlan& r) { return r.gpu_uuid == gpu.uuid; });
    if (used) out.push_back({gpu.index, gpu.uuid, gpu.memory_total_bytes});
  }
  return out;
}

/// The rank that reads air-run's stdin (-1: none): the one --stdin names, else
/// rank 0 of a single-rank run on a terminal (breakpoint() just works).
Expected<int> stdin_rank_for(const LaunchSpec& spec, const LaunchPlan& plan) {
  if (const auto& asked = spec.stdin_rank.value) {
    if (*asked >= plan.world_size)
      return usage_error(fmt::format("stdin (--stdin): rank {} is not in this run (world size {})", *asked,
                                     plan.world_size));
    return *asked;
  }
  return plan.world_size == 1 && ::isatty(STDIN_FILENO) == 1 ? 0 : -1;
}

/// Writes the sitecustomize.py that arms faulthandler in Python ranks, when the plan arms them;
/// with the MLflow run's wait, which run/ cannot name (mlflow/ is above it).
Status write_stack_shim(const LaunchPlan& plan) {
  if (plan.stack_signal <= 0) return ok_status();
  AIR_TRY(make_directories(plan.stack_shim_dir));
  return write_file_atomically(plan.stack_shim_dir + "/" + std::string(k_stack_shim_name),
                               stack_shim_source({mlflow_rank_wait_part()}));
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

/// Everything from the spec to the end of the run. `facts` follows the launch
/// so that a refusal can still be reported (see run_command).
Expected<int> launch_run(const CliOptions& options, const Environment& env, LaunchFacts& facts) {
  auto resolved = resolve_cli_spec(options, env);
  if (!resolved) {
    facts.spec = spec_from_flags_only(options, env);
    return resolved.error();
  }
  for (const auto& warning : resolved->warnings) std::fputs((warning + "\n").c_str(), stderr);
  LaunchSpec& spec = resolved->spec;
  anchor_spec_paths(spec); // relative paths of the spec file: relative to it
  if (auto dir = prepare_checkpoint_dir(spec.checkpoint_dir, !options.dry_run); !dir) {
    facts.spec = spec;
    return dir.error();
  }
  mlflow::apply_standard_variables(spec, env); // MLFLOW_TRACKING_URI & co. as defaults
  facts.spec = spec;
  facts.spec_resolved = true;
  if (spec.command.value.empty()) {
    return usage_error("no target given: use `air-run [options] TARGET [ARGS...]` or `command:` in the spec");
  }

  auto paths = PathTemplates::of(spec);
  if (!paths) {
    facts.spec.reset(); // the report paths themselves are wrong
    return paths.error();
  }

  const Hardware hardware = hardware_for(spec, env);
  facts.hardware = hardware;
  auto selection = select_ranks(spec, hardware);
  if (!selection) return selection.error();
  const Notices notices{spec.quiet.value, use_color(::isatty(STDERR_FILENO) == 1, env)};
  // Before anything else about the run (an environment build, the nodes'
  // join): a multi-day job must not learn of its limit from an exit code 124.
  if (!options.dry_run && spec.timeout.value) {
    notices.print(fmt::format("air-run: this run stops after {} (timeout, {}); --timeout none lifts it",
                              format_duration(*spec.timeout.value), spec.timeout.origin.describe()));
  }

  // environment.dependencies: every rank runs in one cached virtual
  // environment. It is built here, before anything is launched and before the
  // nodes join (a pip install would outlast the control connection's heartbeats).
  const std::vector<std::string> spec_lines = describe_spec(spec); // as the user gave it
  auto python_env = prepare_python_env(spec, env, options.dry_run);
  if (!python_env) return python_env.error();
  if (python_env->interrupted_by != 0) return 128 + python_env->interrupted_by;
  facts.python_env = *python_env;
  if (python_env->active) {
    spec.python.value = python_env->python;
    for (const auto& [name, value] : python_env->vars) spec.env.value[name] = value;
  }

  // MLflow (core/mlflow/): nullptr without a tracking URI; then no MLflow code runs.
  auto tracker = mlflow::Tracker::create(spec, env);
  if (!tracker) return tracker.error();

  // Nodes (cli/nodes.cpp): Slurm or --nnodes/--node-rank; decides the master port.
  auto cluster = resolve_cluster(spec, env, options.dry_run);
  if (!cluster) return cluster.error();
  PlanContext ctx;
  ctx.run_id = spec.run_id.value.empty() ? make_run_id() : spec.run_id.value;
  ctx.master_port = cluster->master_port;
  ctx.node_rank = std::max(0, cluster->node_rank); // c10d: -1 until the join (a dry run shows node 0)
  ctx.num_nodes = cluster->num_nodes;
  ctx.node_name = cluster->node_name;
  ctx.cluster_source = cluster->source;
  if (spec.numa_binding.value != "none") {
    // --numa-binding: the machine's CPUs and each GPU's NUMA node, for the pure planner.
    auto topology = read_cpu_topology();
    if (!topology) return topology.error();
    ctx.topology = std::move(*topology);
    for (const auto& gpu : selection->gpus) ctx.gpu_numa_nodes.push_back(pci_numa_node(gpu.pci_bus_id));
  }
  paths->apply(spec, ctx.run_id, ctx.node_rank);
  facts.run_id = ctx.run_id;
  facts.node_rank = ctx.node_rank;
  // Result and error files live in the log directory when there is one (kept),
  // else (also when each rank has its own log folder) in a private temporary
  // directory removed after the report.
  const bool keep_run_dir =
      !spec.log_dir.value.empty() && spec.log_dir.value.find("{rank}") == std::string::npos;
  ctx.run_dir = keep_run_dir ? spec.log_dir.value : fmt::format("/tmp/air-run-{}", ctx.run_id);

  if (options.dry_run) {
    auto plan = make_plan(spec, *selection, env, ctx);
    if (!plan) return plan.error();
    choose_resume_point(*plan); // what the first attempt would resume from now
    print_lines(ignored_settings_warnings(spec, plan->world_size, plan->ranks_per_node), stderr);
    // What a launch checks before its first rank, so a dry run fails the same way.
    const bool env_to_build = python_env->active && ::access(python_env->python.c_str(), X_OK) != 0;
    if (auto target = check_target(spec, env, !env_to_build); !target) return target.error();
    if (auto ok = check_writable_outputs(spec, false, facts); !ok) return ok.error();
    std::fputs("Resolved spec:\n", stdout);
    for (const auto& line : spec_lines) std::fputs(("  " + line + "\n").c_str(), stdout);
    std::fputs(fmt::format("Hardware: {} ({})\n", detected_accelerator_type(hardware),
                           hardware.reason.empty() ? hardware.source : hardware.reason)
                   .c_str(),
               stdout);
    print_lines(selection->notices, stdout);
    if (python_env->active) std::fputs(fmt::format("Python {}\n", python_env->status).c_str(), stdout);
    if (*tracker) std::fputs(((*tracker)->describe() + "\n").c_str(), stdout);
    std::fputs("Plan:\n", stdout);
    for (const auto& line : describe_plan(*plan)) std::fputs(("  " + line + "\n").c_str(), stdout);
    return 0;
  }

  for (const auto& line : cluster->notices) notices.print(line);
  // Node 0 creates the MLflow run. Python ranks wait for it themselves (in
  // the shim), so for them it is created while the launch goes on (a
  // tracking server: on a thread of its own). Everything else waits for it
  // before going on, as before: the nodes' join (they get its id with
  // `start`), a required run (one that cannot be created fails the launch
  // once the nodes have joined, below), and ranks that are no Python
  // programs or are forked by --preload (they get it in their environment).
  mlflow::Tracker* const tracker_ptr = tracker->get();
  Status tracking = ok_status();
  const auto settle_tracking = [&]() -> std::optional<int> {
    tracking = tracker_ptr->settle();
    if (const int sig = tracker_ptr->interrupted_by(); sig != 0) {
      tracker_ptr->abandon(RunOutcome::Status::interrupted, 128 + sig); // when the run exists already
      return 128 + sig;
    }
    return std::nullopt;
  };
  if (tracker_ptr != nullptr && ctx.node_rank == 0) {
    const bool ranks_wait = runs_python_target(spec) && spec.preload.value.empty() &&
                            !cluster->multi_node() && !tracker_ptr->config().required;
    tracker_ptr->begin(mlflow::gather_launch_facts(spec, *selection, ctx.num_nodes, ctx.run_id, env),
                       ranks_wait);
    if (!ranks_wait) {
      if (const auto code = settle_tracking()) return *code;
    }
  }
  const auto end_tracking = [&](const Error& error) {
    if (tracker_ptr != nullptr && ctx.node_rank == 0)
      tracker_ptr->abandon(RunOutcome::Status::launch_failed, exit_code_for(error.kind));
  };
  // Several nodes: wait for all of them (node 0's run id wins); from here on a
  // failure before launch is told to the other nodes so they stop too. Ctrl-C
  // and SIGTERM end the wait (exit 128+N), as they end a run.
  std::optional<InterruptWatch> interrupts;
  if (cluster->multi_node()) {
    auto watch = InterruptWatch::open();
    if (!watch) return watch.error();
    interrupts = std::move(*watch);
  }
  int interrupted_by = 0;
  const int interrupt_fd = interrupts ? interrupts->fd() : -1;
  auto control =
      tracker_ptr != nullptr && cluster->multi_node() && tracker_ptr->has_run()
          ? join_cluster(*cluster, selection->ranks, ctx.run_id, env, interrupt_fd, &interrupted_by,
                         tracker_ptr->run().experiment_id, tracker_ptr->run().run_id)
          : join_cluster(*cluster, selection->ranks, ctx.run_id, env, interrupt_fd, &interrupted_by);
  if (!control) {
    end_tracking(control.error());
    if (interrupted_by == 0) return control.error();
    std::fputs(fmt::format("air-run: {}\n", control.error().message).c_str(), stderr);
    return 128 + interrupted_by;
  }
  ControlChannel* const channel = control->get();
  if (channel != nullptr) {
    ctx.run_id = channel->run_id();
    if (cluster->c10d) {
      // The join gave this node its rank, the node count (MIN:MAX) and node 0's master port.
      cluster->node_rank = channel->node_rank();
      cluster->num_nodes = channel->num_nodes();
      cluster->master_port = channel->master_port();
      ctx.node_rank = cluster->node_rank;
      ctx.num_nodes = cluster->num_nodes;
      ctx.master_port = cluster->master_port;
    }
    if (tracker_ptr != nullptr && ctx.node_rank != 0)
      tracker_ptr->adopt(channel->mlflow_experiment_id(), channel->mlflow_run_id());
    paths->apply(spec, ctx.run_id, ctx.node_rank);
    facts.run_id = ctx.run_id;
    facts.node_rank = ctx.node_rank;
    if (keep_run_dir) ctx.run_dir = spec.log_dir.value;
    notices.print(fmt::format("air-run: {}", describe_cluster(*cluster, selection->ranks)));
  }
  const auto setup_failed = [channel, &end_tracking](Error error) {
    report_setup_failure(channel, error);
    end_tracking(error);
    return error;
  };
  if (!tracking) return setup_failed(tracking.error());

  if (auto target = check_target(spec, env); !target) return setup_failed(target.error());
  if (auto ok = check_writable_outputs(spec, true, facts); !ok) return setup_failed(ok.error());
  // A run id used before, or by a run going on now, must not cost that run
  // its logs: this run takes a folder no other run wrote.
  const std::string wanted_folder = run_folder_of(spec.log_dir.value);
  auto log_folder = claim_log_folder(spec, ctx.node_rank);
  if (!log_folder) return setup_failed(log_folder.error());
  if (*log_folder != wanted_folder) {
    notices.print(
        fmt::format("air-run: {} holds the logs of another run with run id {}; this run's logs go to {}",
                    wanted_folder, ctx.run_id, *log_folder));
  }
  if (keep_run_dir) {
    ctx.run_dir = spec.log_dir.value;
    // Reports are read back from here: a directory another user can write
    // into could feed them a planted result or a symlink to our secrets.
    if (auto trusted = check_trusted_path(ctx.run_dir, "log directory"); !trusted)
      return setup_failed(trusted.error());
  } else {
    auto dir = make_private_run_dir(env, ctx.run_id);
    if (!dir) return setup_failed(dir.error());
    ctx.run_dir = *dir;
  }
  auto torchrun_dir = make_torchrun_log_dir(spec, env, ctx.run_id);
  if (!torchrun_dir) return setup_failed(torchrun_dir.error());
  ctx.torchrun_log_dir = *torchrun_dir;
  if (!ctx.torchrun_log_dir.empty()) {
    std::fputs(
        fmt::format("air-run: rank output files (--redirects/--tee) in {}\n", ctx.torchrun_log_dir).c_str(),
        stderr);
  }
  // A spare real-time signal arms faulthandler in Python ranks (core/run/stacks.hpp).
  ctx.stack_signal = SIGRTMIN + 3;
  auto plan = make_plan(spec, *selection, env, ctx);
  if (!plan) {
    if (!keep_run_dir) remove_tree(ctx.run_dir);
    return setup_failed(plan.error());
  }
  if (keep_run_dir) {
    // A reused log directory still holds the previous run's files: a rank of
    // this run that writes none must not be reported with the old ones.
    for (const auto& rank : plan->ranks) {
      for (const auto& [path, what] :
           {std::pair{rank.result_file, "result file"}, {rank.error_file, "error file"}}) {
        if (auto removed = remove_stale_file(path, what); !removed) return setup_failed(removed.error());
      }
    }
  }
  print_lines(ignored_settings_warnings(spec, plan->world_size, plan->ranks_per_node), stderr);
  if (tracker_ptr != nullptr) {
    if (!mlflow::Tracker::ranks_can_wait(*plan)) {
      if (const auto code = settle_tracking()) {
        if (!keep_run_dir) remove_tree(ctx.run_dir);
        return *code;
      }
    }
    tracker_ptr->add_rank_environment(*plan);
  }
  if (auto shim = write_stack_shim(*plan); !shim) {
    if (!keep_run_dir) remove_tree(ctx.run_dir);
    return setup_failed(shim.error());
  }
  auto stdin_rank = stdin_rank_for(spec, *plan);
  if (!stdin_rank) {
    if (!keep_run_dir) remove_tree(ctx.run_dir);
    return setup_failed(stdin_rank.error());
  }
  for (const auto& notice : selection->notices) notices.print(fmt::format("air-run: {}", notice));
  for (const auto& notice : plan->notices) notices.print(fmt::format("air-run: {}", notice));
  for (int stream = 0; stream < 2; ++stream) {
    if (plan->filtered_files[stream].empty()) continue;
    notices.print(fmt::format("air-run: {} lines matching --duplicate-{}-filters also go to {}",
                              stream == 0 ? "stdout" : "stderr", stream == 0 ? "stdout" : "stderr",
                              plan->filtered_files[stream]));
  }

  ConsoleOptions console;
  if (spec.json.value) console.stdout_fd = STDERR_FILENO; // stdout carries only the JSON summary
  // One rank cannot interleave with another: its output is printed as is, as torchrun prints it.
  console.prefix = !spec.no_prefix.value && plan->world_size > 1;
  console.stdout_color = use_color(::isatty(console.stdout_fd) == 1, env);
  console.stderr_color = use_color(::isatty(STDERR_FILENO) == 1, env);
  console.stdin_rank = *stdin_rank;
  console.quiet = spec.quiet.value;
  console.timestamps = spec.timestamps.value;
  // Ranks get a terminal where air-run's output is one (libraries keep colour
  // and progress bars); not in CI, whose log is no terminal even under a pty.
  const bool terminal_ok = env_or(env, "CI").empty() && env_or(env, "TERM") != "dumb";
  console.stdout_tty = terminal_ok && ::isatty(console.stdout_fd) == 1;
  console.stderr_tty = terminal_ok && ::isatty(STDERR_FILENO) == 1;
  const bool stdin_here = std::any_of(plan->ranks.begin(), plan->ranks.end(),
                                      [&](const RankPlan& r) { return r.rank == *stdin_rank; });
  // A rank at a prompt owns the terminal's last line: no status area under it.
  console.live = live_view_wanted(spec.live.value && !spec.quiet.value, ::isatty(STDERR_FILENO) == 1, env) &&
                 !stdin_here;
  if (console.live) {
    console.live_gpus = live_gpus(hardware, *plan);
    console.live_nvml = hardware.source == "nvml";
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // An agent that joined a running job starts in the attempt node 0 restarted the group in.
  if (channel != nullptr && channel->first_attempt() > 0)
    *plan = plan_for_attempt(*plan, channel->first_attempt(), plan->master_port, plan->timeout);
  CliAttemptHooks attempt_hooks(channel, plan->master_addr);
  // A node lost under --nnodes MIN:MAX: the survivors plan their groups again.
  attempt_hooks.set_replanner([&](int node_rank, int num_nodes) -> Expected<LaunchPlan> {
    PlanContext regrouped = ctx;
    regrouped.node_rank = node_rank;
    regrouped.num_nodes = num_nodes;
    auto next = make_plan(spec, *selection, env, regrouped);
    if (next && tracker_ptr != nullptr) tracker_ptr->add_rank_environment(*next);
    return next;
  });
  RunOutcome outcome =
      run_attempts(*plan, console, channel, attempt_hooks); // once, or more with --max-restarts
  if (channel != nullptr) channel->finish(outcome); // every node agrees on the end (and its exit code)
  const int code = report_run(spec, hardware, *selection, *plan, outcome, env, tracker_ptr,
                              python_env->active ? &*python_env : nullptr);
  if (!keep_run_dir) remove_tree(ctx.run_dir);
  return code;
}

} // namespace

Expected<int> run_command(const CliOptions& options) {
  const Environment env = current_environment();
  LaunchFacts facts;
  auto code = launch_run(options, env, facts);
  // Every error reaching here was met before any rank started: the launch was refused.
  if (!code) report_refused_launch(facts, code.error(), exit_code_for(code.error().kind), env);
  return code;
}

} // namespace air::cli
