#pragma once

#include "cli/write_reports.hpp"
#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/hw/hardware.hpp"
#include "core/run/plan.hpp"
#include "core/spec/path_template.hpp"
#include "core/spec/spec.hpp"

#include <string>
#include <string_view>

namespace air::cli {

// What the launch (cli/cmd_run.cpp) decides and checks about a run before its
// first rank: the hardware and ranks, the paths it writes, the target.

/// Whether `word` is a unit a duration is written with ("min", "s", "hours"):
/// a command of that name is a duration given with a space ("5 min").
bool is_duration_unit_word(std::string_view word);

/// Fails before launch when the target cannot start, so a typo costs no ranks:
/// the interpreter or executable must resolve, a script must be readable.
/// `check_python` is false for a dry run whose environment a launch would
/// build first: its interpreter does not exist yet, and that is no error.
Status check_target(const LaunchSpec& spec, const Environment& env, bool check_python = true);

/// The hardware a run is matched against. A run that asks for CPU ranks skips
/// the GPU probe: loading NVML costs tens of milliseconds and about 18 MiB of
/// resident memory on a GPU machine, for a run that uses no GPU.
Hardware hardware_for(const LaunchSpec& spec, const Environment& env);

/// The ranks and GPUs: torchrun's --nproc-per-node when given (more ranks
/// than GPUs allowed), else air-run's strict accelerator matching.
Expected<Selection> select_ranks(const LaunchSpec& spec, const Hardware& hardware);

/// The run's own folder inside the log directory: the log directory itself,
/// or the part before the per-rank folder of `logs/<run id>/{rank}`. "" when
/// there is none (no --log-dir, or `{rank}` in the first path segment).
std::string run_folder_of(const std::string& log_dir);

/// torchrun's per-run log directory for -r/-t files, made when either is
/// set: `<base>/<run_id>_XXXXXX` (a temporary base when `base` is "";
/// PathTemplates::torchrun_base gives it).
Expected<std::string> make_torchrun_log_dir(const LaunchSpec& spec, const std::string& base,
                                            const Environment& env, const std::string& run_id);

/// The paths a run writes, as given (with placeholders), and their check:
/// an unknown placeholder is a usage error before anything starts.
struct PathTemplates {
  std::string log_dir, summary_file, junit_file, html_file;
  /// --log-dir as given, before air-run's per-run folder: torchrun's -r/-t
  /// files go to `<this>/<run id>_XXXXXX`, as torchrun puts them.
  std::string given_log_dir;

  static Expected<PathTemplates> of(const LaunchSpec& spec) {
    AIR_TRY(check_placeholders(spec.log_dir.value, {"run_id", "node_rank", "rank"}, "log_dir (--log-dir)"));
    AIR_TRY(check_placeholders(spec.summary_file.value, {"run_id", "node_rank"}, "summary_file (--summary)"));
    AIR_TRY(check_placeholders(spec.junit_file.value, {"run_id", "node_rank"}, "junit_file (--junit)"));
    AIR_TRY(check_placeholders(spec.html_file.value, {"run_id", "node_rank"}, "html (--html)"));
    // A per-run subfolder by default: a second run never overwrites the first.
    return PathTemplates{with_run_folder(spec.log_dir.value), spec.summary_file.value, spec.junit_file.value,
                         spec.html_file.value, spec.log_dir.value};
  }

  /// The folder torchrun's -r/-t files go under: the log directory as given
  /// (`--log-dir logs` -> logs/<run id>_XXXXXX, not logs/<run id>/<run id>_XXXXXX),
  /// the part above `{rank}` when it has one; "" without --log-dir.
  std::string torchrun_base(const std::string& run_id, int node_rank) const {
    return run_folder_of(fill_run_placeholders(given_log_dir, run_id, node_rank));
  }

  /// Puts the run's values into the spec's paths ({rank} stays for the planner).
  void apply(LaunchSpec& spec, const std::string& run_id, int node_rank) const {
    spec.log_dir.value = fill_run_placeholders(log_dir, run_id, node_rank);
    spec.summary_file.value = fill_run_placeholders(summary_file, run_id, node_rank);
    spec.junit_file.value = fill_run_placeholders(junit_file, run_id, node_rank);
    spec.html_file.value = fill_run_placeholders(html_file, run_id, node_rank);
  }
};

/// Takes this node's log folder for the run (core/os/run_folder.hpp): when an
/// earlier or concurrent run with the same run id holds it, this run's logs
/// go to `<folder>.1` (`.2`, ...) instead, and `spec.log_dir` says so.
/// Returns the folder taken ("" without one).
Expected<std::string> claim_log_folder(LaunchSpec& spec, int node_rank);

/// The output paths' check (cli/output_paths.hpp); a refused path is dropped
/// from the refused launch's report, which would only fail on it again.
Status check_writable_outputs(const LaunchSpec& spec, bool create, LaunchFacts& facts);

/// The rank that reads air-run's stdin (-1: none): the one --stdin names, else
/// rank 0 of a single-rank run on a terminal (breakpoint() just works).
Expected<int> stdin_rank_for(const LaunchSpec& spec, const LaunchPlan& plan);

} // namespace air::cli
