#include "core/run/plan.hpp"

#include "core/base/exit_status.hpp"
#include "core/base/text.hpp"
#include "core/run/numa_binding.hpp"
#include "core/run/progress.hpp"
#include "core/run/stacks.hpp"
#include "core/spec/path_template.hpp"
#include "core/spec/torchrun_values.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

namespace air {

namespace {

/// How the target is run: `-m module`, a `.py` script under the interpreter
/// (`-u` for unbuffered output, as torchrun does), or an executable as is.
std::vector<std::string> rank_argv(const LaunchSpec& spec) {
  const auto& command = spec.command.value;
  std::vector<std::string> argv;
  if (spec.no_python.value) return command;
  if (spec.module.value) {
    argv = {spec.python.value, "-u", "-m"};
  } else if (command.front().ends_with(".py")) {
    argv = {spec.python.value, "-u"};
  }
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

void set_unless_present(Environment& env, const std::string& name, const std::string& value) {
  env.emplace(name, value); // emplace keeps an existing value
}

/// torchrun's --virtual-local-rank: the rank's own entry of the parent's
/// CUDA_VISIBLE_DEVICES, or its local rank when the parent set none
/// (local_elastic_agent.py _set_local_rank_env).
Expected<std::string> virtual_device(const Environment& env, int local) {
  const auto it = env.find("CUDA_VISIBLE_DEVICES");
  if (it == env.end()) return std::to_string(local);
  std::vector<std::string> devices;
  std::string_view rest = it->second;
  while (true) {
    const auto comma = rest.find(',');
    devices.emplace_back(trim(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (local >= static_cast<int>(devices.size()))
    return usage_error(fmt::format("--virtual-local-rank: local rank {} exceeds available GPUs in "
                                   "CUDA_VISIBLE_DEVICES={}",
                                   local, it->second));
  return devices[static_cast<std::size_t>(local)];
}

/// --numa-binding for every rank of the plan, and OMP_NUM_THREADS to match
/// when air-run chose it: the physical cores each rank owns, shared evenly
/// by the ranks bound to the same CPUs.
Status bind_ranks(LaunchPlan& plan, NumaMode mode, const Selection& selection, const PlanContext& ctx,
                  bool omp_defaulted) {
  std::vector<std::optional<int>> nodes;
  for (const auto& rank : plan.ranks) {
    std::optional<int> node;
    if (!selection.cpu && !ctx.gpu_numa_nodes.empty())
      node = ctx.gpu_numa_nodes[static_cast<std::size_t>(rank.local_rank) % ctx.gpu_numa_nodes.size()];
    nodes.push_back(node);
  }
  auto bindings = plan_numa_binding(mode, ctx.topology, nodes, !selection.cpu);
  if (!bindings) return bindings.error();
  std::map<std::vector<int>, int> sharing;
  for (const auto& b : *bindings) ++sharing[b.cpus];
  int fewest = 0;
  int most = 0;
  for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
    RankPlan& rank = plan.ranks[i];
    rank.cpu_affinity = (*bindings)[i].cpus;
    rank.numa_node = (*bindings)[i].memory_node;
    if (!omp_defaulted) continue;
    const int threads =
        std::max(1, physical_cores(ctx.topology, rank.cpu_affinity) / sharing[rank.cpu_affinity]);
    rank.env["OMP_NUM_THREADS"] = std::to_string(threads);
    fewest = i == 0 ? threads : std::min(fewest, threads);
    most = std::max(most, threads);
  }
  if (omp_defaulted) {
    plan.notices.push_back(fmt::format(
        "setting OMP_NUM_THREADS={} for each rank: the physical cores of its --numa-binding {} share; set it "
        "to tune",
        fewest == most ? std::to_string(most) : fmt::format("{}..{}", fewest, most), numa_mode_name(mode)));
  }
  return ok_status();
}

} // namespace

Expected<LaunchPlan> make_plan(const LaunchSpec& spec, const Selection& selection,
                               const Environment& parent_env, const PlanContext& ctx) {
  if (spec.command.value.empty()) {
    return usage_error("no target given: use `air-run [options] TARGET [ARGS...]` or `command:` in the spec");
  }
  if (selection.ranks < 1) return usage_error("nothing to run: 0 ranks selected");
  if (!selection.cpu && selection.gpus.empty()) return usage_error("no GPU selected for a GPU run");
  if (!selection.cpu && !selection.shared_gpus && static_cast<int>(selection.gpus.size()) < selection.ranks) {
    return usage_error(fmt::format("{} ranks need {} GPUs, {} selected", selection.ranks, selection.ranks,
                                   selection.gpus.size()));
  }
  if (ctx.num_nodes < 1 || ctx.node_rank < 0 || ctx.node_rank >= ctx.num_nodes) {
    return usage_error(fmt::format("node rank {} is outside 0..{}", ctx.node_rank, ctx.num_nodes - 1));
  }

  LaunchPlan plan;
  plan.run_id = ctx.run_id;
  plan.run_dir = ctx.run_dir;
  plan.run_dir_is_temporary = ctx.run_dir_is_temporary;
  plan.node_rank = ctx.node_rank;
  plan.num_nodes = ctx.num_nodes;
  plan.node_name = ctx.node_name;
  plan.cluster_source = ctx.cluster_source;
  plan.ranks_per_node = selection.ranks;
  plan.world_size = selection.ranks * ctx.num_nodes;
  plan.master_addr = spec.master_addr.value;
  plan.master_port = ctx.master_port;
  plan.timeout = spec.timeout.value;
  plan.max_restarts = spec.max_restarts.value;
  plan.grace_period = spec.grace_period.value;
  plan.hang_timeout = spec.hang_timeout.value;
  plan.hang_startup = spec.hang_startup.value;
  plan.stop_on_hang = spec.on_hang.value == "stop";
  plan.tail_lines = spec.tail_lines.value;

  // Variables common to every rank. The parent's environment comes first, the
  // spec's `env` overrides it, and the launcher's own variables win over both:
  // a stale RANK in the parent must never reach a rank.
  Environment common = parent_env;
  for (const auto& [name, value] : spec.env.value) common[name] = value;

  auto numa_mode = parse_numa_mode(spec.numa_binding.value, "numa_binding");
  if (!numa_mode) return numa_mode.error();
  const bool omp_defaulted = plan.ranks_per_node > 1 && common.count("OMP_NUM_THREADS") == 0;
  if (omp_defaulted && *numa_mode == NumaMode::none) {
    common["OMP_NUM_THREADS"] = "1";
    plan.notices.push_back(
        "setting OMP_NUM_THREADS=1 for each rank to avoid oversubscribing the CPU; set it to tune");
  }
  set_unless_present(common, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  common["PYTHONUNBUFFERED"] = "1";
  common["WORLD_SIZE"] = std::to_string(plan.world_size);
  common["LOCAL_WORLD_SIZE"] = std::to_string(plan.ranks_per_node);
  common["GROUP_RANK"] = std::to_string(plan.node_rank);
  common["GROUP_WORLD_SIZE"] = std::to_string(plan.num_nodes);
  common["NODE_RANK"] = std::to_string(plan.node_rank);
  common["NUM_NODES"] = std::to_string(plan.num_nodes);
  common["ROLE_NAME"] = spec.role.value;
  common["ROLE_WORLD_SIZE"] = std::to_string(plan.world_size);
  common["MASTER_ADDR"] = plan.master_addr;
  common["MASTER_PORT"] = std::to_string(plan.master_port);
  common["TORCHELASTIC_RUN_ID"] = plan.run_id;
  common["TORCHELASTIC_RESTART_COUNT"] = "0";
  common["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(plan.max_restarts);
  common["TORCHELASTIC_USE_AGENT_STORE"] = "False"; // rank 0 hosts the TCPStore
  common["AIR_RUN_ID"] = plan.run_id;
  common["AIR_ACCELERATOR_TYPE"] = selection.accelerator_type;
  common["AIR_NUM_ACCELERATORS"] = std::to_string(selection.ranks);
  if (!spec.checkpoint_dir.value.empty()) {
    // AIR_RESUME_FROM is decided before each attempt (core/run/resume.hpp); a
    // value from the parent must not reach a rank as if air-run had chosen it.
    plan.checkpoint_dir = spec.checkpoint_dir.value;
    common["AIR_CHECKPOINT_DIR"] = plan.checkpoint_dir;
    common.erase("AIR_RESUME_FROM");
  }
  // CUDA_VISIBLE_DEVICES stays as the parent set it, as under torchrun: a
  // rank binds to device LOCAL_RANK inside it, and scripts that parse it as
  // a list of indices keep working. --isolate-gpus narrows it per rank below.

  const auto argv = rank_argv(spec);
  // Python ranks get faulthandler armed through a sitecustomize shim (no
  // change to user code), so a timeout can show where each one was stuck.
  const bool python_target = !spec.no_python.value && argv.size() > 1 && argv.front() == spec.python.value;
  plan.python = spec.python.value;
  if (python_target && !plan.run_dir.empty()) {
    plan.preload = ctx.warm.modules;
    plan.preload_first_attempt = ctx.warm.first_attempt;
  }
  plan.preload_why = ctx.warm.why;
  if (!python_target && !spec.preload.value.empty() && !preload_is_auto(spec))
    plan.notices.push_back("preload is left unused: the ranks are not Python programs run by " +
                           spec.python.value);
  if (python_target && ctx.stack_signal > 0 && !plan.run_dir.empty()) {
    plan.stack_signal = ctx.stack_signal;
    plan.stack_shim_dir = plan.run_dir + "/pyshim";
    const auto existing = common.find("PYTHONPATH");
    common["PYTHONPATH"] =
        plan.stack_shim_dir +
        (existing == common.end() || existing->second.empty() ? std::string() : ":" + existing->second);
    common[std::string(k_stack_signal_var)] = std::to_string(ctx.stack_signal);
    // The shim appends air-run's own `air` package behind site-packages, so
    // ranks launched from a checkout can import it (an installed one wins).
    if (!ctx.python_package_dir.empty()) common["AIR_RUN_PYTHON_PACKAGE_DIR"] = ctx.python_package_dir;
    // PyTorch's Flight Recorder keeps each rank's last collectives (NCCL)
    // for a hang's diagnosis. The TORCH_FR_* names are torch 2.11's (it
    // warns on every rank about the older TORCH_NCCL_* ones, so those are
    // left to users of older releases). A user's own setting wins.
    if (common.count("TORCH_NCCL_TRACE_BUFFER_SIZE") == 0)
      set_unless_present(common, "TORCH_FR_BUFFER_SIZE", "2000");
    if (common.count("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") == 0)
      set_unless_present(common, "TORCH_FR_DUMP_TEMP_FILE", plan.run_dir + "/flight_recorder_rank");
  }
  const auto& console = spec.console_ranks.value;
  const auto& local_filter = spec.local_ranks_filter.value;
  const std::string log_dir = spec.log_dir.value;
  auto redirects = parse_std_streams(spec.redirects.value, "redirects");
  if (!redirects) return redirects.error();
  auto tee = parse_std_streams(spec.tee.value, "tee");
  if (!tee) return tee.error();
  // One copy of the variables every rank shares; each rank adds its own.
  const auto shared = std::make_shared<const Environment>(std::move(common));
  for (int local = 0; local < selection.ranks; ++local) {
    RankPlan rank;
    rank.local_rank = local;
    rank.rank = plan.node_rank * plan.ranks_per_node + local;
    rank.argv = argv;
    rank.env = RankEnvironment(shared);
    rank.result_file = fmt::format("{}/rank{}.result.json", plan.run_dir, rank.rank);
    rank.error_file = fmt::format("{}/rank{}.error.json", plan.run_dir, rank.rank);
    if (!log_dir.empty()) // `--log-dir logs/{rank}`: a folder per rank
      rank.log_file = fmt::format(
          "{}/rank{}.log", substitute_placeholder(log_dir, "rank", std::to_string(rank.rank)), rank.rank);
    rank.console = console.empty() || std::find(console.begin(), console.end(), rank.rank) != console.end();
    if (!local_filter.empty() &&
        std::find(local_filter.begin(), local_filter.end(), local) == local_filter.end())
      rank.console = false;
    // torchrun's -r/-t: <log dir>/<run>_<random>/attempt_<n>/<local_rank>/{stdout,stderr}.log.
    const int redirected = redirects->for_rank(local);
    const int teed = tee->for_rank(local);
    const std::string attempt_dir = fmt::format("{}/attempt_{}/{}", ctx.torchrun_log_dir, ctx.attempt, local);
    for (int stream = 0; stream < 2; ++stream) {
      const int bit = 1 << stream;
      if (((redirected | teed) & bit) == 0 || ctx.torchrun_log_dir.empty()) continue;
      rank.stream_files[stream] = attempt_dir + (stream == 0 ? "/stdout.log" : "/stderr.log");
      rank.stream_console[stream] = (teed & bit) != 0;
    }
    if (!ctx.torchrun_log_dir.empty()) rank.error_file = attempt_dir + "/error.json";

    auto& env = rank.env;
    env["RANK"] = std::to_string(rank.rank);
    env["ROLE_RANK"] = std::to_string(rank.rank);
    env["LOCAL_RANK"] = std::to_string(local);
    env["AIR_RESULT_FILE"] = rank.result_file;
    env["TORCHELASTIC_ERROR_FILE"] = rank.error_file;
    if (plan.stack_signal > 0) {
      rank.stack_file = fmt::format("{}/rank{}.stacks.txt", plan.run_dir, rank.rank);
      env[std::string(k_stack_file_var)] = rank.stack_file;
      rank.progress_file = fmt::format("{}/rank{}.progress", plan.run_dir, rank.rank);
      env[std::string(k_progress_file_var)] = rank.progress_file;
    }
    if (!selection.cpu) {
      rank.gpu_uuid = selection.gpus[static_cast<size_t>(local) % selection.gpus.size()].uuid;
      if (spec.isolate_gpus.value) {
        // Opt-in isolation: the rank sees only its GPU, which is device 0 to it.
        env["CUDA_VISIBLE_DEVICES"] = rank.gpu_uuid;
        env["LOCAL_RANK"] = "0";
      }
    }
    if (spec.virtual_local_rank.value) {
      // torchrun's: LOCAL_RANK 0 and one device, whatever the hardware;
      // LOCAL_WORLD_SIZE stays the node's.
      auto device = virtual_device(*shared, local);
      if (!device) return device.error();
      env["CUDA_VISIBLE_DEVICES"] = *device;
      env["LOCAL_RANK"] = "0";
    }
    rank.fresh_reason = ctx.warm.fresh_reason;
    plan.ranks.push_back(std::move(rank));
  }
  if (*numa_mode != NumaMode::none) AIR_TRY(bind_ranks(plan, *numa_mode, selection, ctx, omp_defaulted));
  if (!spec.signals_to_handle.is_default()) {
    auto signals = parse_signal_list(spec.signals_to_handle.value, "signals_to_handle");
    if (!signals) return signals.error();
    plan.forwarded_signals = std::move(*signals);
  }
  const std::string* filters[2] = {&spec.duplicate_stdout_filters.value,
                                   &spec.duplicate_stderr_filters.value};
  for (int stream = 0; stream < 2; ++stream) {
    plan.duplicate_filters[stream] = parse_filter_list(*filters[stream]);
    if (!plan.duplicate_filters[stream].empty() && !ctx.torchrun_log_dir.empty())
      plan.filtered_files[stream] = fmt::format("{}/attempt_{}/filtered_{}.log", ctx.torchrun_log_dir,
                                                ctx.attempt, stream == 0 ? "stdout" : "stderr");
  }
  return plan;
}

std::vector<std::string> describe_plan(const LaunchPlan& plan) {
  std::vector<std::string> lines;
  lines.push_back(fmt::format("run {}: {} rank(s) on node {}/{}{}, world size {}, master {}:{}", plan.run_id,
                              plan.ranks_per_node, plan.node_rank, plan.num_nodes,
                              plan.node_name.empty() ? "" : " (" + plan.node_name + ")", plan.world_size,
                              plan.master_addr, plan.master_port));
  lines.push_back(fmt::format("timeout {}, grace period {}",
                              plan.timeout ? format_duration(*plan.timeout) : "none",
                              format_duration(plan.grace_period)));
  if (!plan.checkpoint_dir.empty()) {
    lines.push_back(
        fmt::format("checkpoints in {}; resume from {}", plan.checkpoint_dir,
                    plan.resume_from.empty() ? "none (no complete checkpoint)" : plan.resume_from));
  }
  if (!plan.preload_why.empty()) lines.push_back(plan.preload_why);
  static constexpr std::string_view k_shown[] = {"RANK",
                                                 "LOCAL_RANK",
                                                 "WORLD_SIZE",
                                                 "LOCAL_WORLD_SIZE",
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "CUDA_VISIBLE_DEVICES",
                                                 "OMP_NUM_THREADS",
                                                 "AIR_RESULT_FILE",
                                                 "AIR_CHECKPOINT_DIR",
                                                 "AIR_RESUME_FROM",
                                                 "TORCHELASTIC_ERROR_FILE"};
  for (int stream = 0; stream < 2; ++stream) {
    if (plan.duplicate_filters[stream].empty()) continue;
    // A dry run makes no log folder: the file's name, where a launch puts it.
    const std::string& file = plan.filtered_files[stream];
    lines.push_back(fmt::format("{} lines containing {} also go to {}", stream == 0 ? "stdout" : "stderr",
                                join(plan.duplicate_filters[stream], " or "),
                                file.empty() ? fmt::format("filtered_{}.log in torchrun's log folder",
                                                           stream == 0 ? "stdout" : "stderr")
                                             : file));
  }
  if (plan.forwarded_signals) {
    std::vector<std::string> names;
    for (int sig : *plan.forwarded_signals) names.push_back(signal_name(sig));
    lines.push_back("signals forwarded to the ranks: " + join(names, ", "));
  }
  for (const auto& rank : plan.ranks) {
    std::string argv;
    for (const auto& arg : rank.argv) argv += (argv.empty() ? "" : " ") + arg;
    lines.push_back(fmt::format("rank {} (local {}): {}", rank.rank, rank.local_rank, argv));
    std::string vars;
    for (auto name : k_shown) {
      if (const std::string* value = rank.env.get(std::string(name)))
        vars += fmt::format(" {}={}", name, *value);
    }
    lines.push_back("  " + vars.substr(vars.empty() ? 0 : 1));
    if (!rank.gpu_uuid.empty()) lines.push_back("  gpu: " + rank.gpu_uuid);
    if (!rank.cpu_affinity.empty())
      lines.push_back(fmt::format("  numa: cpus {}, memory node {}", format_rank_list(rank.cpu_affinity),
                                  rank.numa_node));
    if (!rank.log_file.empty()) lines.push_back("  log: " + rank.log_file);
    if (!rank.console) lines.push_back("  console: hidden (--ranks, --local-ranks-filter)");
    for (int stream = 0; stream < 2; ++stream) {
      if (rank.stream_files[stream].empty()) continue;
      lines.push_back(fmt::format("  {}: {}{}", stream == 0 ? "stdout" : "stderr", rank.stream_files[stream],
                                  rank.stream_console[stream] ? " (tee)" : ""));
    }
  }
  return lines;
}

} // namespace air
