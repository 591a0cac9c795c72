#include "cli/console_setup.hpp"

#include "core/run/console_style.hpp"
#include "core/run/live_view.hpp"

#include <unistd.h>

#include <algorithm>
#include <vector>

namespace air::cli {
namespace {

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

} // namespace

ConsoleOptions console_options_for(const LaunchSpec& spec, const LaunchPlan& plan, const Hardware& hardware,
                                   int stdin_rank, const Environment& env) {
  ConsoleOptions console;
  if (spec.json.value) console.stdout_fd = STDERR_FILENO; // stdout carries only the JSON summary
  // One rank cannot interleave with another: its output is printed as is, as torchrun prints it.
  console.prefix = !spec.no_prefix.value && plan.world_size > 1;
  console.stdout_color = use_color(::isatty(console.stdout_fd) == 1, env);
  console.stderr_color = use_color(::isatty(STDERR_FILENO) == 1, env);
  console.stdin_rank = stdin_rank;
  console.quiet = spec.quiet.value;
  console.timestamps = spec.timestamps.value;
  // Ranks get a terminal where air-run's output is one (libraries keep colour
  // and progress bars); not in CI, whose log is no terminal even under a pty.
  const bool terminal_ok = env_or(env, "CI").empty() && env_or(env, "TERM") != "dumb";
  console.stdout_tty = terminal_ok && ::isatty(console.stdout_fd) == 1;
  console.stderr_tty = terminal_ok && ::isatty(STDERR_FILENO) == 1;
  const bool stdin_here = std::any_of(plan.ranks.begin(), plan.ranks.end(),
                                      [&](const RankPlan& r) { return r.rank == stdin_rank; });
  // A rank at a prompt owns the terminal's last line: no status area under it.
  console.live = live_view_wanted(spec.live.value && !spec.quiet.value, ::isatty(STDERR_FILENO) == 1, env) &&
                 !stdin_here;
  if (console.live) {
    console.live_gpus = live_gpus(hardware, plan);
    console.live_nvml = hardware.source == "nvml";
  }
  return console;
}

} // namespace air::cli
