// The single key table. YAML parsing, AIR_RUN_* variables, flags, --help,
// --dry-run and the docs/spec.md table are all driven from these rows.
#include "core/spec/spec.hpp"

#include <array>
#include <string>

namespace air {
namespace {

using VT = ValueType;
namespace G = key_group;

// Ranks one node may run: far above any machine (each rank is a process with
// pipes and a log), low enough that a typo such as 2147483647 is refused
// before air-run reserves memory for every rank.
constexpr std::int64_t k_max_ranks_per_node = 4096;

// Columns: key, long flag, short flag, env var, type, default, doc, help group,
// value name[, min, max].
constexpr std::array k_spec_keys{
    SpecKey{"accelerator_type", "accelerator-type", "", "AIR_RUN_ACCELERATOR_TYPE", VT::string, "detected",
            "CPU or GPU_<n>x<MODEL> (GPU_1xA10, GPU_8xH100, GPU_2xH200...)", G::accelerators, "TYPE"},
    SpecKey{"num_accelerators", "num-accelerators", "n", "AIR_RUN_NUM_ACCELERATORS", VT::integer,
            "all detected GPUs", "ranks on this node, one accelerator each", G::accelerators, "N", 1,
            k_max_ranks_per_node},
    SpecKey{"cpu_ranks", "cpu-ranks", "", "AIR_RUN_CPU_RANKS", VT::integer, "1",
            "ranks on CPU where no GPU is found (with GPUs, one rank per GPU and a notice)", G::accelerators,
            "N", 1, k_max_ranks_per_node},
    SpecKey{"timeout", "timeout", "", "AIR_RUN_TIMEOUT", VT::opt_duration, "none",
            "stop the run after this long: seconds, a duration (90m, 1h30m) or none", G::launch, "DURATION"},
    SpecKey{"grace_period", "grace-period", "", "AIR_RUN_GRACE_PERIOD", VT::duration, "30s",
            "time between SIGTERM and SIGKILL when stopping ranks", G::launch, "DURATION"},
    SpecKey{"hang_timeout", "hang-timeout", "", "AIR_RUN_HANG_TIMEOUT", VT::opt_duration, "5m",
            "diagnose the run when no rank made progress (a step or a line of output) this long; none: never",
            G::launch, "DURATION"},
    SpecKey{
        "hang_startup", "hang-startup", "", "AIR_RUN_HANG_STARTUP", VT::duration, "60s",
        "until any rank printed a line or made a step, a hang waits at least this long (interpreter start "
        "and import torch on a loaded machine)",
        G::launch, "DURATION"},
    SpecKey{
        "on_hang", "on-hang", "", "AIR_RUN_ON_HANG", VT::string, "report; stop with max_restarts",
        "after a hang's diagnosis: report (the run goes on) or stop (the attempt ends hung; restarted while "
        "max_restarts allows, else exit code 124)",
        G::launch, "report|stop"},
    SpecKey{"environment.python", "python", "", "AIR_RUN_PYTHON", VT::string,
            "the virtual environment's when air-run is installed in one, else python3",
            "interpreter for .py targets and -m modules", G::environment, "PYTHON"},
    SpecKey{"environment.dependencies", "", "", "", VT::string_list, "none",
            "pip requirement strings, or the path of a requirements file", G::environment, ""},
    SpecKey{"environment.find_links", "find-links", "", "AIR_RUN_FIND_LINKS", VT::string_list, "none",
            "local directories (or URLs) pip looks in for packages; repeatable", G::environment, "DIR"},
    SpecKey{"environment.index_url", "index-url", "", "AIR_RUN_INDEX_URL", VT::string, "pip's default",
            "package index pip installs from", G::environment, "URL"},
    SpecKey{"environment.no_index", "no-index", "", "AIR_RUN_NO_INDEX", VT::boolean, "false",
            "never contact a package index (offline installs from find_links)", G::environment, ""},
    SpecKey{"environment.system_site_packages", "system-site-packages", "", "AIR_RUN_SYSTEM_SITE_PACKAGES",
            VT::boolean, "true", "the environment also sees the base interpreter's packages (a system torch)",
            G::environment, ""},
    SpecKey{"env_cache_dir", "env-cache-dir", "", "AIR_RUN_ENV_CACHE_DIR", VT::string,
            "$XDG_CACHE_HOME/air-run/envs", "where cached Python environments live", G::environment, "DIR"},
    SpecKey{"rebuild_env", "rebuild-env", "", "", VT::boolean, "false",
            "build the Python environment again even when a cached one exists", G::environment, ""},
    SpecKey{"env", "env", "", "", VT::string_map, "none",
            "extra variables for every rank (flag: KEY=VALUE, repeatable; YAML alias env_variables)",
            G::environment, "KEY=VALUE"},
    SpecKey{"command", "", "", "", VT::string_list, "required",
            "what each rank runs: a list, or one string split like a shell", G::launch, ""},
    SpecKey{"module", "module", "m", "", VT::boolean, "false",
            "run the target as a Python module (python -m)", G::launch, ""},
    SpecKey{"no_python", "no-python", "", "", VT::boolean, "false",
            "run the target as an executable, not through Python", G::launch, ""},
    SpecKey{"master_addr", "master-addr", "", "AIR_RUN_MASTER_ADDR", VT::string, "127.0.0.1",
            "MASTER_ADDR given to every rank", G::nodes, "ADDR"},
    SpecKey{"master_port", "master-port", "", "AIR_RUN_MASTER_PORT", VT::integer, "0",
            "MASTER_PORT given to every rank; 0 picks a free port", G::nodes, "PORT", 0, 65535},
    SpecKey{"nnodes", "nnodes", "", "AIR_RUN_NNODES", VT::integer, "1 (Slurm: the step's nodes)",
            "number of nodes, one air-run agent each; MIN:MAX with rdzv_backend c10d", G::nodes, "N|MIN:MAX",
            1, 100'000},
    SpecKey{"node_rank", "node-rank", "", "AIR_RUN_NODE_RANK", VT::integer, "0 (Slurm: SLURM_NODEID)",
            "this node's rank among the nodes, 0..nnodes-1", G::nodes, "N", 0, 99'999},
    SpecKey{"join_timeout", "join-timeout", "", "AIR_RUN_JOIN_TIMEOUT", VT::duration, "5m",
            "how long node 0's agent waits for every node to join before naming the missing ones", G::nodes,
            "DURATION"},
    SpecKey{"control_port", "control-port", "", "AIR_RUN_CONTROL_PORT", VT::integer, "master_port + 1",
            "TCP port of node 0's agent for the multi-node control connection; 0 = master_port + 1", G::nodes,
            "PORT", 0, 65535},
    SpecKey{"max_restarts", "max-restarts", "", "AIR_RUN_MAX_RESTARTS", VT::integer, "0",
            "restart the whole worker group (every node) up to this many times after a rank fails",
            G::torchrun, "N", 0, 1'000'000},
    SpecKey{
        "checkpoint_dir", "checkpoint-dir", "", "AIR_RUN_CHECKPOINT_DIR", VT::string, "none",
        "checkpoint directory: ranks get AIR_CHECKPOINT_DIR, and AIR_RESUME_FROM when it holds a complete "
        "checkpoint (created when missing)",
        G::launch, "DIR"},
    SpecKey{"preload", "preload", "", "AIR_RUN_PRELOAD", VT::string_list, "auto",
            "Python modules imported once in a warm interpreter that forks the ranks (fast restarts; flag "
            "repeatable or comma-separated); auto: torch when the target imports it (a script's imports, or "
            "the modules an @distributed function uses: AIR_RUN_TARGET_MODULES), where it cannot slow the "
            "launch; none (--no-preload): off",
            G::launch, "MODULE,..."},
    SpecKey{"rdzv_backend", "rdzv-backend", "", "AIR_RUN_RDZV_BACKEND", VT::string, "static",
            "how nodes meet: static (node ranks given) or c10d (node ranks in order of arrival)", G::torchrun,
            "BACKEND"},
    SpecKey{"rdzv_endpoint", "rdzv-endpoint", "", "AIR_RUN_RDZV_ENDPOINT", VT::string, "none",
            "HOST[:PORT] where the nodes meet: the master for static, the joining agent's port for c10d "
            "(default port 29400)",
            G::torchrun, "HOST[:PORT]"},
    SpecKey{"rdzv_id", "rdzv-id", "", "AIR_RUN_RDZV_ID", VT::string, "none",
            "torchrun's job id: the run id (TORCHELASTIC_RUN_ID) unless run_id is given", G::torchrun, "ID"},
    SpecKey{"rdzv_conf", "rdzv-conf", "", "AIR_RUN_RDZV_CONF", VT::string, "none",
            "KEY=VALUE,... as torchrun: join_timeout, last_call_timeout, read_timeout (seconds) are used",
            G::torchrun, "KEY=VALUE,..."},
    SpecKey{"standalone", "standalone", "", "AIR_RUN_STANDALONE", VT::boolean, "false",
            "one node with a private rendezvous on a free local port, as torchrun --standalone", G::torchrun,
            ""},
    SpecKey{"log_dir", "log-dir", "", "AIR_RUN_LOG_DIR", VT::string, "none",
            "directory for per-rank log files", G::output, "DIR"},
    SpecKey{"console_ranks", "ranks", "", "AIR_RUN_CONSOLE_RANKS", VT::rank_list, "all",
            "ranks whose output reaches the console, like 0,2-3", G::output, "RANKS"},
    SpecKey{"isolate_gpus", "isolate-gpus", "", "AIR_RUN_ISOLATE_GPUS", VT::boolean, "false",
            "give each rank only its own GPU in CUDA_VISIBLE_DEVICES", G::accelerators, ""},
    SpecKey{"run_id", "run-id", "", "AIR_RUN_RUN_ID", VT::string, "generated",
            "name of this run (letters, digits, '.', '_', '-')", G::output, "NAME"},
    SpecKey{"summary_file", "summary", "", "AIR_RUN_SUMMARY_FILE", VT::string, "none",
            "write the JSON run summary to this path", G::output, "FILE"},
    SpecKey{"json", "json", "", "AIR_RUN_JSON", VT::boolean, "false", "print the JSON run summary on stdout",
            G::output, ""},
    SpecKey{"html", "html", "", "AIR_RUN_HTML", VT::string, "none",
            "write the run as one self-contained HTML page (a picture of its timeline) to this path",
            G::output, "FILE"},
    SpecKey{"junit_file", "junit", "", "AIR_RUN_JUNIT_FILE", VT::string, "none",
            "write a JUnit XML report (one test case per rank) to this path", G::output, "FILE"},
    SpecKey{"tail_lines", "tail-lines", "", "AIR_RUN_TAIL_LINES", VT::integer, "50",
            "output lines kept per rank for failure reports", G::output, "N", 0, 1'000'000},
    SpecKey{
        "mlflow.tracking_uri", "mlflow-tracking-uri", "", "AIR_RUN_MLFLOW_TRACKING_URI", VT::string,
        "$MLFLOW_TRACKING_URI, else none",
        "MLflow tracking server (http(s)://HOST, databricks) or store (file:, sqlite:); none: no tracking",
        G::mlflow, "URI"},
    SpecKey{"mlflow.experiment", "mlflow-experiment", "", "AIR_RUN_MLFLOW_EXPERIMENT", VT::string,
            "$MLFLOW_EXPERIMENT_NAME, else $MLFLOW_EXPERIMENT_ID, else Default",
            "experiment name of the run (created when missing)", G::mlflow, "NAME"},
    SpecKey{"mlflow.run_name", "mlflow-run-name", "", "AIR_RUN_MLFLOW_RUN_NAME", VT::string,
            "the target (train.py)", "name of the MLflow run", G::mlflow, "NAME"},
    SpecKey{"mlflow.tags", "mlflow-tag", "", "AIR_RUN_MLFLOW_TAGS", VT::string_map, "none",
            "extra tags of the run (flag: KEY=VALUE, repeatable; variable: comma separated)", G::mlflow,
            "KEY=VALUE"},
    SpecKey{"mlflow.required", "mlflow-required", "", "AIR_RUN_MLFLOW_REQUIRED", VT::boolean, "false",
            "launch nothing (exit 2) when the run cannot be created", G::mlflow, ""},
    SpecKey{"mlflow.timeout", "mlflow-timeout", "", "AIR_RUN_MLFLOW_TIMEOUT", VT::duration, "15s",
            "how long an unreachable or failing tracking server is retried, at the start and at the end",
            G::mlflow, "DURATION"},
    SpecKey{"no_prefix", "no-prefix", "", "AIR_RUN_NO_PREFIX", VT::boolean, "false (true with one rank)",
            "print rank output without the [rankN]: prefix, as torchrun does", G::output, ""},
    // torchrun's own options, with torchrun's meaning (docs/torchrun.md).
    SpecKey{"nproc_per_node", "nproc-per-node", "", "", VT::string, "none",
            "torchrun's ranks per node: N, gpu, cpu or auto; more ranks than GPUs share them", G::torchrun,
            "N|gpu|cpu|auto"},
    SpecKey{"role", "role", "", "", VT::string, "default", "ROLE_NAME given to every rank", G::torchrun,
            "ROLE"},
    SpecKey{"redirects", "redirects", "r", "", VT::string, "0",
            "rank output to files only: 1 stdout, 2 stderr, 3 both, or per local rank (0:3,1:2)", G::torchrun,
            "MODE"},
    SpecKey{"tee", "tee", "t", "", VT::string, "0", "like redirects, and to the console as well", G::torchrun,
            "MODE"},
    SpecKey{"local_ranks_filter", "local-ranks-filter", "", "", VT::rank_list, "all",
            "local ranks whose output reaches the console, like 0,2-3", G::torchrun, "RANKS"},
    SpecKey{
        "numa_binding", "numa-binding", "", "AIR_RUN_NUMA_BINDING", VT::string, "none",
        "bind each rank's CPUs to its GPU's NUMA node (CPU ranks: the nodes in turn) and prefer its memory "
        "there: node, socket, exclusive, core-complex or none",
        G::torchrun, "MODE"},
    SpecKey{"signals_to_handle", "signals-to-handle", "", "AIR_RUN_SIGNALS_TO_HANDLE", VT::string,
            "air-run's: SIGINT, SIGTERM, SIGHUP stop the ranks, SIGUSR1, SIGUSR2 reach them, SIGQUIT shows "
            "stacks",
            "signals forwarded to every rank, like SIGTERM,SIGUSR1: SIGINT, SIGTERM, SIGHUP, SIGQUIT then "
            "stop the "
            "run, SIGUSR1, SIGUSR2 leave it running",
            G::torchrun, "SIG,..."},
    SpecKey{"duplicate_stdout_filters", "duplicate-stdout-filters", "", "AIR_RUN_DUPLICATE_STDOUT_FILTERS",
            VT::string, "none",
            "comma-separated substrings: rank stdout lines containing one are also written to "
            "filtered_stdout.log in the log folder",
            G::torchrun, "TEXT,..."},
    SpecKey{"duplicate_stderr_filters", "duplicate-stderr-filters", "", "AIR_RUN_DUPLICATE_STDERR_FILTERS",
            VT::string, "none", "the same for stderr, into filtered_stderr.log", G::torchrun, "TEXT,..."},
    SpecKey{"virtual_local_rank", "virtual-local-rank", "", "AIR_RUN_VIRTUAL_LOCAL_RANK", VT::boolean,
            "false",
            "every rank gets LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES narrowed to its own device, as torchrun's",
            G::torchrun, ""},
    SpecKey{"live", "live", "", "AIR_RUN_LIVE", VT::boolean, "true",
            "a live status area (ranks, time left, GPU readings) under the rank output when stderr is a "
            "terminal and CI is unset; --no-live turns it off",
            G::output, ""},
    SpecKey{"quiet", "quiet", "q", "AIR_RUN_QUIET", VT::boolean, "false",
            "only rank output and the final report: no notices, no live status", G::output, ""},
    SpecKey{"stdin", "stdin", "", "AIR_RUN_STDIN", VT::integer,
            "rank 0 when there is one rank and stdin is a terminal",
            "the rank that reads air-run's stdin (breakpoint(), pdb); the others read /dev/null", G::launch,
            "RANK", 0},
    SpecKey{"timestamps", "timestamps", "", "AIR_RUN_TIMESTAMPS", VT::boolean, "false",
            "start each rank line on the console with the wall-clock time (HH:MM:SS.mmm)", G::output, ""},
};

constexpr std::array k_legacy_keys{
    LegacyKey{"gpus", "num_accelerators", "gpus", "AIR_RUN_GPUS"},
    LegacyKey{"gpu_type", "accelerator_type", "gpu-type", "AIR_RUN_GPU_TYPE"},
};

// Markdown cells must not contain a bare '|'.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string code(std::string_view text) { return text.empty() ? "" : "`" + std::string(text) + "`"; }

} // namespace

std::span<const SpecKey> spec_keys() { return k_spec_keys; }

const SpecKey* find_spec_key(std::string_view key) {
  for (const SpecKey& row : k_spec_keys) {
    if (row.key == key) return &row;
  }
  return nullptr;
}

std::span<const LegacyKey> legacy_keys() { return k_legacy_keys; }

std::string spec_keys_markdown() {
  std::string out = "| key | flag | env var | default | meaning |\n|---|---|---|---|---|\n";
  for (const SpecKey& row : k_spec_keys) {
    std::string flags;
    if (!row.short_flag.empty()) flags = code("-" + std::string(row.short_flag)) + ", ";
    if (!row.flag.empty()) flags += code("--" + std::string(row.flag));
    if (row.key == "env") flags = code("--env KEY=VALUE");
    if (row.key == "command") flags = "`TARGET ARGS...`";
    out += "| " + code(row.key) + " | " + flags + " | " + code(row.env) + " | " + cell(row.default_text) +
           " | " + cell(row.doc) + " |\n";
  }
  return out;
}

} // namespace air
