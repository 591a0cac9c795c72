#include "core/run/plan.hpp"

#include "core/run/progress.hpp"
#include "core/run/stacks.hpp"
#include "core/spec/path_template.hpp"

#include <fmt/format.h>

#include <algorithm>

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
  plan.stop_on_hang = spec.on_hang.value == "stop";
  plan.tail_lines = spec.tail_lines.value;

  // Variables common to every rank. The parent's environment comes first, the
  // spec's `env` overrides it, and the launcher's own variables win over both:
  // a stale RANK in the parent must never reach a rank.
  Environment common = parent_env;
  for (const auto& [name, value] : spec.env.value) common[name] = value;

  const bool omp_defaulted = plan.ranks_per_node > 1 && common.count("OMP_NUM_THREADS") == 0;
  if (omp_defaulted) {
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
  if (python_target && ctx.stack_signal > 0 && !plan.run_dir.empty()) {
    plan.stack_signal = ctx.stack_signal;
    plan.stack_shim_dir = plan.run_dir + "/pyshim";
    const auto existing = common.find("PYTHONPATH");
    common["PYTHONPATH"] =
        plan.stack_shim_dir +
        (existing == common.end() || existing->second.empty() ? std::string() : ":" + existing->second);
    common[std::string(k_stack_signal_var)] = std::to_string(ctx.stack_signal);
    // PyTorch's Flight Recorder keeps each rank's last collectives (NCCL)
    // for a hang's diagnosis. The TORCH_FR_* names are torch 2.11's (it
    // warns on every rank about the older TORCH_NCCL_* ones, so those are
    // left to users of older releases). A user's own setting wins.
    if (common.count("TORCH_NCCL_TRACE_BUFFER_SIZE") == 0) set_unless_present(common, "TORCH_FR_BUFFER_SIZE", "2000");
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
  for (int local = 0; local < selection.ranks; ++local) {
    RankPlan rank;
    rank.local_rank = local;
    rank.rank = plan.node_rank * plan.ranks_per_node + local;
    rank.argv = argv;
    rank.env = common;
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
    plan.ranks.push_back(std::move(rank));
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
  for (const auto& rank : plan.ranks) {
    std::string argv;
    for (const auto& arg : rank.argv) argv += (argv.empty() ? "" : " ") + arg;
    lines.push_back(fmt::format("rank {} (local {}): {}", rank.rank, rank.local_rank, argv));
    std::string vars;
    for (auto name : k_shown) {
      const auto it = rank.env.find(std::string(name));
      if (it != rank.env.end()) vars += fmt::format(" {}={}", name, it->second);
    }
    lines.push_back("  " + vars.substr(vars.empty() ? 0 : 1));
    if (!rank.gpu_uuid.empty()) lines.push_back("  gpu: " + rank.gpu_uuid);
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
