#include "cli/launch_checks.hpp"

#include "cli/output_paths.hpp"
#include "core/os/host.hpp"
#include "core/os/run_folder.hpp"
#include "core/os/trusted_path.hpp"
#include "core/spec/path_template.hpp"
#include "core/spec/torchrun.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

namespace air::cli {

Status check_target(const LaunchSpec& spec, const Environment& env, bool check_python) {
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
  if (!exe) {
    // `--hang-timeout 5 min`: the number was the duration, the unit became the command.
    if (is_duration_unit_word(command.front()))
      return Error{exe.error().kind, exe.error().message + " (durations take no space: 5min, not 5 min)"};
    return exe.error();
  }
  return ok_status();
}

bool is_duration_unit_word(std::string_view word) {
  static constexpr std::string_view k_units[] = {
      "ms",      "s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute",
      "minutes", "h", "hr",  "hrs",  "hour",   "hours",   "d", "day", "days"};
  for (const std::string_view unit : k_units)
    if (word == unit) return true;
  return false;
}

namespace {

std::optional<std::string> requested_type(const LaunchSpec& spec) {
  if (spec.accelerator_type.value.empty()) return std::nullopt;
  return spec.accelerator_type.value;
}

} // namespace

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

std::string run_folder_of(const std::string& log_dir) {
  const auto rank = log_dir.find("{rank}");
  if (rank == std::string::npos) return log_dir;
  const auto slash = log_dir.rfind('/', rank);
  return slash == std::string::npos || slash == 0 ? std::string() : log_dir.substr(0, slash);
}

Expected<std::string> make_torchrun_log_dir(const LaunchSpec& spec, const std::string& given_base,
                                            const Environment& env, const std::string& run_id) {
  if (spec.redirects.value == "0" && spec.tee.value == "0" && spec.duplicate_stdout_filters.value.empty() &&
      spec.duplicate_stderr_filters.value.empty())
    return std::string();
  std::string base = given_base;
  if (base.empty()) base = fmt::format("{}/torchelastic_{}", env_or(env, "TMPDIR", "/tmp"), run_id);
  AIR_TRY(make_directories(base));
  std::string path = fmt::format("{}/{}_XXXXXX", base, run_id);
  if (mkdtemp(path.data()) == nullptr) {
    return Error{ErrorKind::system, fmt::format("mkdtemp {}: {}", path, std::strerror(errno))};
  }
  return path;
}

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

Status check_writable_outputs(const LaunchSpec& spec, bool create, LaunchFacts& facts) {
  std::string refused_key;
  auto ok = check_output_paths(spec, create, &refused_key);
  if (!ok && facts.spec) {
    if (refused_key == "summary_file") facts.spec->summary_file.value.clear();
    if (refused_key == "junit_file") facts.spec->junit_file.value.clear();
    if (refused_key == "html") facts.spec->html_file.value.clear();
  }
  return ok;
}

Expected<int> stdin_rank_for(const LaunchSpec& spec, const LaunchPlan& plan) {
  if (const auto& asked = spec.stdin_rank.value) {
    if (*asked >= plan.world_size)
      return usage_error(fmt::format("stdin (--stdin): rank {} is not in this run (world size {})", *asked,
                                     plan.world_size));
    return *asked;
  }
  return plan.world_size == 1 && ::isatty(STDIN_FILENO) == 1 ? 0 : -1;
}

} // namespace air::cli
