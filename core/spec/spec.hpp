#pragma once

#include "core/base/duration.hpp"
#include "core/base/environment.hpp"
#include "core/base/error.hpp"
#include "core/base/text.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace air {

/// Where a spec value came from. Precedence is fixed: flag > env > file > default.
struct Origin {
  enum class Kind { default_value, file, env, flag };
  Kind kind = Kind::default_value;
  std::string where; ///< "job.yaml:7:3", "AIR_RUN_TIMEOUT", "--timeout" or "" for defaults

  /// Human form for --dry-run: "default", "job.yaml:7:3", "env AIR_RUN_TIMEOUT", "flag --timeout";
  /// a default chosen by how air-run was started says why: "default, torchrun command line (--standalone)".
  std::string describe() const;
};

/// One resolved spec value and its origin.
template <typename T> struct Setting {
  T value{};
  Origin origin{};
  bool is_default() const { return origin.kind == Origin::Kind::default_value; }
};

/// The value types a spec key can have; the table below drives parsing with them.
enum class ValueType {
  string,
  integer,      ///< decimal, no sign unless the key allows it
  boolean,      ///< true/false (also yes/no/1/0 from flags and env), strict
  duration,     ///< "30", "30s", "90m", "3h", "1h30m"
  opt_duration, ///< a duration or "none"
  string_list,  ///< YAML sequence of strings; flags repeat; env is comma separated
  string_map,   ///< YAML mapping of strings; flags repeat as KEY=VALUE
  rank_list,    ///< "0,2-3", or a YAML list of ranks; flags repeat and accumulate
};

/// Headings under which `--help` and the man page list the flags; each key
/// row names one.
namespace key_group {
inline constexpr std::string_view launch = "Launch";
inline constexpr std::string_view accelerators = "Accelerators";
inline constexpr std::string_view environment = "Environment";
inline constexpr std::string_view nodes = "Nodes";
inline constexpr std::string_view output = "Output and reports";
inline constexpr std::string_view mlflow = "MLflow tracking";
inline constexpr std::string_view torchrun = "torchrun compatibility";
} // namespace key_group

/// One row of the single key table: it drives YAML parsing, flags, AIR_RUN_*
/// variables, validation, `--help`, the man page, shell completion and the docs/spec.md table.
struct SpecKey {
  std::string_view key;        ///< YAML path, dotted for nested keys ("environment.python")
  std::string_view flag;       ///< long flag without dashes ("timeout"), "" when there is none
  std::string_view short_flag; ///< single letter ("n"), "" when there is none
  std::string_view env;        ///< AIR_RUN_* variable, "" when there is none
  ValueType type;
  std::string_view default_text;       ///< as shown in docs
  std::string_view doc;                ///< one line
  std::string_view group;              ///< `--help` heading, one of key_group
  std::string_view value_name;         ///< `--help` placeholder ("N", "DIR"); "" for booleans
  std::int64_t min_value = 0;          ///< integer keys only: smallest accepted value
  std::int64_t max_value = 2147483647; ///< integer keys only: largest accepted value
};

/// Every key air-run understands, in documentation order.
std::span<const SpecKey> spec_keys();

/// Finds a key row by YAML key; nullptr when unknown.
const SpecKey* find_spec_key(std::string_view key);

/// A legacy serverless_gpu name accepted with a deprecation warning. The CLI
/// registers `flag` and passes it to `resolve_spec` with key `name`.
struct LegacyKey {
  std::string_view name;     ///< "gpus"
  std::string_view replaced; ///< "num_accelerators"
  std::string_view flag;     ///< "gpus" (long flag without dashes)
  std::string_view env;      ///< "AIR_RUN_GPUS"
};

/// Every legacy name, each mapped to the key that replaces it.
std::span<const LegacyKey> legacy_keys();

/// The docs/spec.md key table (key | flag | env var | default | meaning), rendered from
/// `spec_keys()` so documentation cannot drift from the parser.
std::string spec_keys_markdown();

/// What the user asked for, typed and validated, each value with its origin.
/// Produced only by `resolve_spec`; consumed by hardware matching and `make_plan`.
struct LaunchSpec {
  Setting<std::string> accelerator_type;        ///< canonical "GPU_8xH100" or "CPU"; "" = detect
  Setting<std::optional<int>> num_accelerators; ///< nullopt = all detected GPUs (CPU: cpu_ranks)
  Setting<int> cpu_ranks{1, {}};                ///< ranks on CPU when num_accelerators is not given
  /// nullopt = none, the default: a wall-clock limit ends a multi-day job with
  /// 124 and is never restarted; the hang detector is the safety net.
  Setting<std::optional<Millis>> timeout{std::nullopt, {}};
  Setting<Millis> grace_period{Millis(30'000), {}};
  Setting<std::optional<Millis>> hang_timeout{Millis(300'000), {}}; ///< nullopt = no hang detection
  Setting<Millis> hang_startup{Millis(60'000),
                               {}};               ///< the least quiet time for a hang before any sign of life
  Setting<std::string> on_hang{"report", {}};     ///< "report" or "stop"
  Setting<std::string> python{"python3", {}};     ///< environment.python
  Setting<std::vector<std::string>> dependencies; ///< environment.dependencies (requirement strings)
  Setting<std::string> requirements_file;         ///< when environment.dependencies is a path
  Setting<std::vector<std::string>> find_links;   ///< environment.find_links (pip --find-links)
  Setting<std::string> index_url;                 ///< environment.index_url, "" = pip's default
  Setting<bool> no_index;                         ///< environment.no_index
  Setting<bool> system_site_packages{true, {}};   ///< environment.system_site_packages
  Setting<std::string> env_cache_dir;             ///< "" = $XDG_CACHE_HOME/air-run/envs
  Setting<bool> rebuild_env;                      ///< build the environment even when cached
  Setting<std::map<std::string, std::string>> env; ///< extra variables for every rank
  Setting<std::vector<std::string>> command;       ///< target followed by its arguments
  Setting<bool> module;                            ///< target is a Python module (-m)
  Setting<bool> no_python;                         ///< target is an executable (--no-python)
  Setting<std::string> master_addr{"127.0.0.1", {}};
  Setting<int> master_port;                          ///< 0 = choose a free port
  Setting<int> nnodes{1, {}};                        ///< number of nodes (one agent each); MAX of MIN:MAX
  Setting<int> nnodes_min{1, {}};                    ///< MIN of nnodes MIN:MAX (= nnodes for a plain N)
  Setting<int> node_rank;                            ///< this node's rank among the nodes
  Setting<Millis> join_timeout{Millis(300'000), {}}; ///< multi-node: wait for every agent this long
  Setting<int> control_port;                         ///< 0 = master_port + 1
  Setting<int> max_restarts;                         ///< worker-group restarts after a failure
  Setting<std::string> checkpoint_dir;               ///< "" = none (core/run/resume.hpp)
  Setting<std::vector<std::string>> preload;         ///< modules of the warm start (core/warm/warm_start.hpp)
  Setting<std::string> rdzv_backend{"static", {}};   ///< "static" or "c10d"
  Setting<std::string> rdzv_endpoint;                ///< HOST[:PORT], "" = none
  Setting<std::string> rdzv_id;                      ///< torchrun's job id ("" = none)
  Setting<std::string> rdzv_conf;                    ///< "KEY=VALUE,..." as given
  Setting<bool> standalone;                          ///< torchrun --standalone
  /// From rdzv_conf (resolve_spec fills them): how long a c10d host waits
  /// for more nodes once MIN have joined, and how long a silent peer is
  /// tolerated (nullopt: the control connection's own 5 s).
  Setting<Millis> last_call_timeout{Millis(30'000), {}};
  Setting<std::optional<Millis>> read_timeout;
  Setting<std::string> log_dir;             ///< "" = no per-rank log files
  Setting<std::vector<int>> console_ranks;  ///< empty = every rank reaches the console
  Setting<bool> isolate_gpus;               ///< one GPU per rank via CUDA_VISIBLE_DEVICES
  Setting<std::string> run_id;              ///< "" = generate
  Setting<std::string> summary_file;        ///< JSON summary path, "" = none
  Setting<bool> json;                       ///< print the JSON summary on stdout
  Setting<std::string> junit_file;          ///< JUnit XML path, "" = none
  Setting<std::string> html_file;           ///< the run's HTML page (core/report/html_page.hpp), "" = none
  Setting<int> tail_lines{50, {}};          ///< output lines kept per rank for reports
  Setting<std::string> mlflow_tracking_uri; ///< "" = no MLflow tracking
  Setting<std::string> mlflow_experiment;   ///< experiment name, "" = see core/mlflow/settings.hpp
  Setting<std::string> mlflow_run_name;     ///< "" = the target's name
  Setting<std::map<std::string, std::string>> mlflow_tags; ///< extra run tags
  Setting<bool> mlflow_required;                           ///< no run, no launch (exit 2)
  Setting<Millis> mlflow_timeout{Millis(15'000), {}};      ///< retry budget per tracking phase
  Setting<bool> no_prefix;                                 ///< rank output without "[rankN]: "
  Setting<std::string> nproc_per_node;                     ///< torchrun's N|gpu|cpu|auto, "" = not given
  Setting<std::string> role{"default", {}};                ///< ROLE_NAME
  Setting<std::string> redirects{"0", {}};                 ///< torchrun's -r (parse_std_streams)
  Setting<std::string> tee{"0", {}};                       ///< torchrun's -t (parse_std_streams)
  Setting<std::vector<int>> local_ranks_filter;            ///< empty = every local rank reaches the console
  Setting<std::string> numa_binding{"none", {}}; ///< a NumaMode's name (core/spec/torchrun_values.hpp)
  Setting<std::string> signals_to_handle;        ///< "" = air-run's own signal handling
  Setting<std::string> duplicate_stdout_filters; ///< comma-separated substrings, "" = none
  Setting<std::string> duplicate_stderr_filters; ///< the same for stderr
  Setting<bool> virtual_local_rank;              ///< LOCAL_RANK=0, one device per rank
  Setting<bool> live{true, {}};           ///< the live status area on a terminal (core/run/live_view.hpp)
  Setting<bool> quiet;                    ///< only rank output and the final report
  Setting<std::optional<int>> stdin_rank; ///< the rank given air-run's stdin; nullopt = see keys.cpp
  Setting<bool> timestamps;               ///< rank lines on the console start with the time

  std::string spec_path; ///< the -f file, "" when none
};

/// Everything `resolve_spec` reads; the CLI fills it, tests build it by hand.
struct SpecInputs {
  std::optional<std::string> file_text; ///< YAML text of the spec file, when given
  std::string file_path;                ///< its path as the user typed it (for messages)
  Environment environment;              ///< the AIR_RUN_* variables are read from here
  /// Flag values in command-line order as (key, text, spelling), e.g.
  /// ("timeout", "90m", "--timeout"); list and map keys may repeat.
  std::vector<std::tuple<std::string, std::string, std::string>> flags;
  std::vector<std::string> command; ///< trailing TARGET ARGS... from the command line
  /// The interpreter to use when environment.python is not given, and why
  /// ("the virtual environment air-run is installed in"); empty: python3.
  std::string default_python;
  std::string default_python_why;
};

/// A resolved spec plus the warnings (deprecations, notices) to print before launch.
/// Each warning is a whole line to print as is (no trailing newline):
/// "air-run: warning: job.yaml:3:1: 'gpus' is deprecated, use 'num_accelerators'".
struct ResolvedSpec {
  LaunchSpec spec;
  std::vector<std::string> warnings;
};

/// Merges defaults < file < AIR_RUN_* env < flags, checks types and ranges.
/// A higher source replaces a whole value, except `env`, which merges per
/// variable. Repeated flags of list keys accumulate. An empty command is not
/// an error here (the CLI checks it).
/// Errors (usage kind, exit 2) name the place and the key:
/// "job.yaml:4:10: timeout: ...", "environment variable AIR_RUN_TIMEOUT: ...",
/// "--timeout: ...", and suggest a close key for unknown ones
/// ("job.yaml:2:1: unknown key 'timout' (did you mean 'timeout'?)").
Expected<ResolvedSpec> resolve_spec(const SpecInputs& inputs);

/// Where nodes meet, from rdzv_endpoint: "HOST", "HOST:PORT", "[V6]:PORT".
struct Endpoint {
  std::string host;
  int port = -1; ///< -1 when the text gave none
};

/// Parses HOST[:PORT] (IPv6 in brackets). Errors (usage) name `what`:
/// "--rdzv-endpoint: bad port 'x' in 'host:x'".
Expected<Endpoint> parse_endpoint(std::string_view text, std::string_view what);

/// torchrun's --rdzv-conf "k1=v1,k2=v2" as pairs, in order. Errors name `what`.
Expected<std::vector<std::pair<std::string, std::string>>> parse_rdzv_conf(std::string_view text,
                                                                           std::string_view what);

/// The default port of a c10d endpoint without one, as torchrun's.
inline constexpr int k_c10d_default_port = 29400;

/// "key = value (origin)" lines for --dry-run, in table order.
std::vector<std::string> describe_spec(const LaunchSpec& spec);

/// A URI as it may be shown: "https://user:secret@host/x" -> "https://host/x".
/// Tracking URIs can carry credentials; --dry-run, the summary and messages
/// print only this form.
std::string without_userinfo(std::string_view uri);

} // namespace air
