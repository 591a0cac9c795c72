#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/base/rank_environment.hpp"
#include "core/hw/cpu_topology.hpp"
#include "core/hw/hardware.hpp"
#include "core/spec/spec.hpp"
#include "core/spec/torchrun.hpp"
#include "core/warm/warm_choice.hpp"

#include <optional>
#include <string>
#include <vector>

namespace air {

/// Exactly what one rank will execute. Pure data: printable by --dry-run and
/// executed only by the supervisor.
struct RankPlan {
  int rank = 0;                  ///< global rank
  int local_rank = 0;            ///< rank on this node
  std::vector<std::string> argv; ///< argv[0] is resolved through PATH at spawn time
  RankEnvironment env;           ///< the rank's complete environment (the node's shared part and its own)
  std::string result_file;       ///< AIR_RESULT_FILE
  std::string error_file;        ///< TORCHELASTIC_ERROR_FILE
  std::string log_file;          ///< per-rank log ("" without --log-dir)
  /// Why it starts fresh although the warm start was asked for or chosen
  /// (WarmChoice::fresh_reason); "" otherwise.
  std::string fresh_reason;
  bool console = true; ///< whether its lines reach the console
  /// torchrun's -r/-t files, [0] stdout and [1] stderr ("" = none), and
  /// whether each stream still reaches the console (tee) or only its file.
  std::string stream_files[2];
  bool stream_console[2] = {true, true};
  std::string gpu_uuid;   ///< the GPU it binds to ("" on CPU)
  std::string stack_file; ///< where its Python stacks are dumped ("" when not armed, core/run/stacks.hpp)
  /// The page where its shim counts steps and collectives ("" when not a
  /// Python rank, core/run/progress.hpp); the supervisor creates it.
  std::string progress_file;
  /// --numa-binding: the CPUs the rank may run on (ascending; empty: no
  /// binding, air-run's own) and the NUMA node its memory is preferred on
  /// (-1: none). The spawn applies both in the child before exec.
  std::vector<int> cpu_affinity;
  int numa_node = -1;
};

/// The whole run: ranks plus the policy the supervisor enforces.
struct LaunchPlan {
  std::string run_id;
  std::string run_dir;               ///< private directory for result and error files
  bool run_dir_is_temporary = false; ///< air-run's own folder in $TMPDIR, not a kept log directory
  int node_rank = 0;
  int num_nodes = 1;
  std::string node_name; ///< this node (SLURMD_NODENAME or the host name), for per-node reports
  std::string cluster_source = "single"; ///< "single", "static" or "slurm" (core/cluster/placement.hpp)
  int ranks_per_node = 0;
  int world_size = 0;
  std::string master_addr;
  int master_port = 0;
  std::optional<Millis> timeout; ///< nullopt = none; with restarts, for the whole run
  int max_restarts = 0;          ///< TORCHELASTIC_MAX_RESTARTS
  int attempt = 0;               ///< TORCHELASTIC_RESTART_COUNT (core/run/attempts.hpp)
  std::string checkpoint_dir;    ///< absolute AIR_CHECKPOINT_DIR, "" = none (core/run/resume.hpp)
  std::string resume_from;       ///< this attempt's AIR_RESUME_FROM, "" = none
  /// --preload: the modules the warm interpreter imports, and that
  /// interpreter (the ranks'); empty when off or the target is no Python
  /// program (core/warm/warm_start.hpp). `preload_first_attempt`: the first
  /// attempt forks from it too, else only restarts do (core/warm/warm_choice.hpp).
  std::vector<std::string> preload;
  bool preload_first_attempt = true;
  std::string preload_why; ///< the warm start's line for --dry-run
  std::string python;
  Millis grace_period{30'000};
  /// --hang-timeout: diagnose the run after this long without a step or a
  /// line of output from any rank (nullopt: never); --on-hang stop ends it.
  std::optional<Millis> hang_timeout;
  /// --hang-startup: before any rank printed a line or made a step, a hang
  /// waits at least this long (starting Python and importing torch).
  Millis hang_startup{60'000};
  bool stop_on_hang = false;
  int tail_lines = 50;
  std::vector<RankPlan> ranks;
  std::vector<std::string> notices; ///< printed once before launch (e.g. OMP_NUM_THREADS)
  /// The signal that asks an armed Python rank for its stacks (0: none armed),
  /// and the directory holding the shim that arms it (core/run/stacks.hpp).
  int stack_signal = 0;
  std::string stack_shim_dir;
  /// --signals-to-handle as signal numbers; nullopt when not given
  /// (core/run/signal_actions.hpp says what each signal then does).
  std::optional<std::vector<int>> forwarded_signals;
  /// --duplicate-stdout-filters / --duplicate-stderr-filters ([0] stdout,
  /// [1] stderr): a rank line containing one of them is also appended to
  /// filtered_files[stream] ("" = none), torchrun's filtered_stdout.log.
  std::vector<std::string> duplicate_filters[2];
  std::string filtered_files[2];
};

/// Values decided outside the pure planner (they need the OS or the clock).
struct PlanContext {
  std::string run_id;
  std::string run_dir;
  bool run_dir_is_temporary = false;
  int master_port = 0; ///< a free port already chosen when the spec gave none
  int node_rank = 0;
  int num_nodes = 1;
  std::string node_name;
  std::string cluster_source = "single";
  /// torchrun's per-run log directory (`<log_dir>/<run_id>_<random>`) for
  /// -r/-t files: attempt_<n>/<local_rank>/{stdout,stderr}.log, error.json.
  std::string torchrun_log_dir;
  int attempt = 0;      ///< TORCHELASTIC_RESTART_COUNT of the group being planned
  int stack_signal = 0; ///< a spare real-time signal for Python stacks; 0: do not arm
  /// air-run's own `air` package (core/os/host.hpp find_python_package_dir),
  /// handed to Python ranks so the shim can append it behind site-packages;
  /// "" when none was found. Found by the caller: planning touches no file.
  std::string python_package_dir;
  /// For --numa-binding: the machine's CPUs (core/hw/cpu_topology.hpp) and
  /// the NUMA node of each selected GPU, in Selection::gpus order (nullopt: unknown).
  CpuTopology topology;
  std::vector<std::optional<int>> gpu_numa_nodes;
  /// The warm start (--preload), decided by the caller: it reads the target
  /// and the CPUs (core/warm/warm_choice.hpp choose_warm_start).
  WarmChoice warm;
};

/// Builds the per-rank plan from a resolved spec, the accelerator selection and
/// the parent's environment. Pure: no system calls. Errors are usage errors.
Expected<LaunchPlan> make_plan(const LaunchSpec& spec, const Selection& selection,
                               const Environment& parent_env, const PlanContext& ctx);

/// Ranks for torchrun's --nproc-per-node, decided as torchrun decides them:
/// gpu needs a GPU ("CUDA is not available" otherwise), cpu is `cpu_count`
/// ranks, auto the GPUs when there are any, else `cpu_count`. A count runs on
/// the GPUs when there are any, several ranks to a GPU when there are fewer
/// (with a notice), and on CPU when there are none. accelerator_type CPU
/// keeps every rank on CPU. Pure.
Expected<Selection> select_nproc_per_node(const NprocPerNode& nproc,
                                          const std::optional<std::string>& requested_type,
                                          const Hardware& hw, int cpu_count);

/// Human rendering of the plan for --dry-run (argv and the variables air-run sets).
std::vector<std::string> describe_plan(const LaunchPlan& plan);

} // namespace air
