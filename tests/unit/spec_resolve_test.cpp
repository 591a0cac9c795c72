#include "core/spec/spec.hpp"
#include "core/spec/yaml_syntax.hpp"
#include "tests/unit/catch.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using air::Millis;
using air::Origin;

namespace {

using Flags = std::vector<std::tuple<std::string, std::string, std::string>>;

air::SpecInputs inputs_from(std::string yaml, air::Environment env = {}, Flags flags = {},
                            std::vector<std::string> command = {}) {
  air::SpecInputs in;
  in.file_text = std::move(yaml);
  in.file_path = "job.yaml";
  in.environment = std::move(env);
  in.flags = std::move(flags);
  in.command = std::move(command);
  return in;
}

air::ResolvedSpec resolve_ok(const air::SpecInputs& in) {
  auto r = air::resolve_spec(in);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return std::move(r).value();
}

air::ResolvedSpec resolve_ok(std::string yaml, air::Environment env = {}, Flags flags = {}) {
  return resolve_ok(inputs_from(std::move(yaml), std::move(env), std::move(flags)));
}

std::string resolve_error(const air::SpecInputs& in) {
  auto r = air::resolve_spec(in);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == air::ErrorKind::usage);
  return r.error().message;
}

std::string resolve_error(std::string yaml, air::Environment env = {}, Flags flags = {}) {
  return resolve_error(inputs_from(std::move(yaml), std::move(env), std::move(flags)));
}

std::string where(const Origin& o) { return o.describe(); }

} // namespace

TEST_CASE("key table has one row per LaunchSpec field, unique names", "[spec]") {
  const std::vector<std::string> expected = {"accelerator_type",
                                             "num_accelerators",
                                             "cpu_ranks",
                                             "timeout",
                                             "grace_period",
                                             "hang_timeout",
                                             "hang_startup",
                                             "on_hang",
                                             "environment.python",
                                             "environment.dependencies",
                                             "environment.find_links",
                                             "environment.index_url",
                                             "environment.no_index",
                                             "environment.system_site_packages",
                                             "env_cache_dir",
                                             "rebuild_env",
                                             "env",
                                             "command",
                                             "module",
                                             "no_python",
                                             "master_addr",
                                             "master_port",
                                             "nnodes",
                                             "node_rank",
                                             "join_timeout",
                                             "control_port",
                                             "max_restarts",
                                             "checkpoint_dir",
                                             "preload",
                                             "rdzv_backend",
                                             "rdzv_endpoint",
                                             "rdzv_id",
                                             "rdzv_conf",
                                             "standalone",
                                             "log_dir",
                                             "console_ranks",
                                             "isolate_gpus",
                                             "run_id",
                                             "summary_file",
                                             "json",
                                             "html",
                                             "junit_file",
                                             "tail_lines",
                                             "mlflow.tracking_uri",
                                             "mlflow.experiment",
                                             "mlflow.run_name",
                                             "mlflow.tags",
                                             "mlflow.required",
                                             "mlflow.timeout",
                                             "no_prefix",
                                             "nproc_per_node",
                                             "role",
                                             "redirects",
                                             "tee",
                                             "local_ranks_filter",
                                             "numa_binding",
                                             "signals_to_handle",
                                             "duplicate_stdout_filters",
                                             "duplicate_stderr_filters",
                                             "virtual_local_rank",
                                             "live",
                                             "quiet",
                                             "stdin",
                                             "timestamps"};
  std::vector<std::string> keys;
  std::set<std::string_view> flags;
  std::set<std::string_view> envs;
  const std::set<std::string_view> groups = {air::key_group::launch,      air::key_group::accelerators,
                                             air::key_group::environment, air::key_group::nodes,
                                             air::key_group::output,      air::key_group::mlflow,
                                             air::key_group::torchrun};
  for (const auto& row : air::spec_keys()) {
    keys.emplace_back(row.key);
    CHECK_FALSE(row.doc.empty());
    CHECK_FALSE(row.default_text.empty());
    // Every row has a --help heading; a flag that takes a value has a placeholder, a switch none.
    CHECK(groups.count(row.group) == 1);
    CHECK(row.value_name.empty() == (row.flag.empty() || row.type == air::ValueType::boolean));
    if (!row.flag.empty()) CHECK(flags.insert(row.flag).second);
    if (!row.short_flag.empty()) CHECK(flags.insert(row.short_flag).second);
    if (!row.env.empty()) {
      CHECK(envs.insert(row.env).second);
      CHECK(row.env.substr(0, 8) == "AIR_RUN_");
    }
    CHECK(air::find_spec_key(row.key) == &row);
  }
  CHECK(keys == expected);
  // The CLI owns these; the table must not claim them.
  for (const char* reserved : {"help", "h", "version", "dry-run", "list-gpus", "spec", "f", "json-summary"}) {
    CHECK(flags.count(reserved) == 0);
  }
  CHECK(air::find_spec_key("timout") == nullptr);
  CHECK(air::find_spec_key("num_accelerators")->short_flag == "n");
  CHECK(air::find_spec_key("module")->short_flag == "m");
  CHECK(air::find_spec_key("console_ranks")->flag == "ranks");
  CHECK(air::find_spec_key("summary_file")->flag == "summary");
  CHECK(air::find_spec_key("junit_file")->flag == "junit");
  CHECK(air::find_spec_key("environment.python")->env == "AIR_RUN_PYTHON");
  CHECK(air::find_spec_key("master_port")->max_value == 65535);
  for (const auto& legacy : air::legacy_keys()) CHECK(air::find_spec_key(legacy.replaced) != nullptr);
  REQUIRE(air::legacy_keys().size() == 2);
  CHECK(air::legacy_keys()[0].name == "gpus");
  CHECK(air::legacy_keys()[0].replaced == "num_accelerators");
  CHECK(air::legacy_keys()[1].name == "gpu_type");
  CHECK(air::legacy_keys()[1].replaced == "accelerator_type");
}

TEST_CASE("the docs/spec.md table is rendered from the key table", "[spec]") {
  const std::string md = air::spec_keys_markdown();
  CHECK(md.rfind("| key | flag | env var | default | meaning |\n|---|---|---|---|---|\n", 0) == 0);
  std::size_t lines = static_cast<std::size_t>(std::count(md.begin(), md.end(), '\n'));
  CHECK(lines == air::spec_keys().size() + 2);
  for (const auto& row : air::spec_keys()) {
    CHECK(md.find("| `" + std::string(row.key) + "` |") != std::string::npos);
    if (!row.flag.empty() && row.key != "env")
      CHECK(md.find("`--" + std::string(row.flag) + "`") != std::string::npos);
    if (!row.env.empty()) CHECK(md.find("`" + std::string(row.env) + "`") != std::string::npos);
  }
  CHECK(
      md.find("| `num_accelerators` | `-n`, `--num-accelerators` | `AIR_RUN_NUM_ACCELERATORS` | all detected "
              "GPUs | ranks on this node, one accelerator each |") != std::string::npos);
  CHECK(md.find("`--env KEY=VALUE`") != std::string::npos);
}

TEST_CASE("a file with every key resolves, each value typed with its origin", "[spec]") {
  const auto r = resolve_ok(R"(# every key once
accelerator_type: GPU_8xH100
num_accelerators: 8
cpu_ranks: 3
timeout: 1h30m
grace_period: 1500ms
environment:
  python: /usr/bin/python3
  dependencies:
    - torch>=2.0
    - numpy
  find_links: [wheels]
  index_url: http://127.0.0.1:1/simple
  no_index: true
  system_site_packages: false
env_cache_dir: cache
rebuild_env: true
env:
  NCCL_DEBUG: INFO
  SEED: 7
command: [train.py, --lr, "0.1"]
module: false
no_python: false
master_addr: 10.0.0.1
master_port: 29500
nnodes: 4
node_rank: 2
join_timeout: 90s
control_port: 29600
max_restarts: 2
checkpoint_dir: ckpt
rdzv_backend: static
rdzv_endpoint: 10.0.0.1:29500
rdzv_id: exp-1.a_b
rdzv_conf: join_timeout=90,read_timeout=30
standalone: false
log_dir: logs
console_ranks: "0,2-3"
isolate_gpus: true
run_id: exp-1.a_b
summary_file: out/summary.json
json: True
junit_file: out/junit.xml
tail_lines: 0
mlflow:
  tracking_uri: http://mlflow:5000
  experiment: exp
  run_name: run
  tags: {team: vision}
  required: true
  timeout: 1m
no_prefix: true
role: trainer
redirects: "3"
tee: "0:1,1:2"
local_ranks_filter: "1"
numa_binding: core-complex
signals_to_handle: SIGTERM,SIGUSR1
duplicate_stdout_filters: loss,acc
duplicate_stderr_filters: Warning
virtual_local_rank: true
live: false
quiet: true
stdin: 3
timestamps: true
hang_timeout: 90s
hang_startup: 2m
on_hang: stop
preload: [torch, numpy]
html: out/run.html
)");
  const auto& s = r.spec;
  CHECK(r.warnings.empty());
  CHECK(s.html_file.value == "out/run.html");
  CHECK(s.accelerator_type.value == "GPU_8xH100");
  CHECK(where(s.accelerator_type.origin) == "job.yaml:2:1");
  CHECK(s.num_accelerators.value == std::optional<int>(8));
  CHECK(s.cpu_ranks.value == 3);
  CHECK(s.timeout.value == std::optional<Millis>(Millis(5'400'000)));
  CHECK(where(s.timeout.origin) == "job.yaml:5:1");
  CHECK(s.grace_period.value == Millis(1500));
  CHECK(s.hang_timeout.value == std::optional<Millis>(Millis(90'000)));
  CHECK(s.hang_startup.value == Millis(120'000));
  CHECK(s.on_hang.value == "stop");
  CHECK(s.python.value == "/usr/bin/python3");
  CHECK(where(s.python.origin) == "job.yaml:8:3");
  CHECK(s.dependencies.value == std::vector<std::string>{"torch>=2.0", "numpy"});
  CHECK(s.requirements_file.value.empty());
  CHECK(s.env.value == std::map<std::string, std::string>{{"NCCL_DEBUG", "INFO"}, {"SEED", "7"}});
  CHECK(s.command.value == std::vector<std::string>{"train.py", "--lr", "0.1"});
  CHECK(where(s.command.origin) == "job.yaml:21:1");
  CHECK_FALSE(s.module.value);
  CHECK(s.module.origin.kind == Origin::Kind::file);
  CHECK_FALSE(s.no_python.value);
  CHECK(s.master_addr.value == "10.0.0.1");
  CHECK(s.master_port.value == 29500);
  CHECK(s.nnodes.value == 4);
  CHECK(s.node_rank.value == 2);
  CHECK(s.join_timeout.value == Millis(90'000));
  CHECK(s.control_port.value == 29600);
  CHECK(s.max_restarts.value == 2);
  CHECK(s.checkpoint_dir.value == "ckpt");
  CHECK(s.preload.value == std::vector<std::string>{"torch", "numpy"});
  CHECK(s.rdzv_conf.value == "join_timeout=90,read_timeout=30");
  CHECK(s.read_timeout.value == std::optional<Millis>(Millis(30'000)));
  CHECK(s.log_dir.value == "logs");
  CHECK(s.console_ranks.value == std::vector<int>{0, 2, 3});
  CHECK(s.isolate_gpus.value);
  CHECK(s.run_id.value == "exp-1.a_b");
  CHECK(s.summary_file.value == "out/summary.json");
  CHECK(s.json.value);
  CHECK(s.junit_file.value == "out/junit.xml");
  CHECK(s.tail_lines.value == 0);
  CHECK(s.mlflow_tracking_uri.value == "http://mlflow:5000");
  CHECK(where(s.mlflow_tracking_uri.origin) == "job.yaml:46:3");
  CHECK(s.mlflow_tags.value == std::map<std::string, std::string>{{"team", "vision"}});
  CHECK(s.mlflow_required.value);
  CHECK(s.mlflow_timeout.value == Millis(60'000));
  CHECK(s.no_prefix.value);
  CHECK(s.role.value == "trainer");
  CHECK(s.redirects.value == "3");
  CHECK(s.tee.value == "0:1,1:2");
  CHECK(s.local_ranks_filter.value == std::vector<int>{1});
  CHECK(s.numa_binding.value == "core-complex");
  CHECK(s.signals_to_handle.value == "SIGTERM,SIGUSR1");
  CHECK(s.duplicate_stdout_filters.value == "loss,acc");
  CHECK(s.duplicate_stderr_filters.value == "Warning");
  CHECK(s.virtual_local_rank.value);
  CHECK_FALSE(s.live.value);
  CHECK(s.quiet.value);
  CHECK(s.stdin_rank.value == std::optional<int>(3));
  CHECK(s.timestamps.value);
  CHECK(s.spec_path == "job.yaml");
  for (const auto& line : air::describe_spec(s)) {
    INFO(line);
    // every key came from the file, but nproc_per_node (it excludes num_accelerators)
    if (line.rfind("nproc_per_node", 0) != 0) CHECK(line.find("(default)") == std::string::npos);
  }
}

TEST_CASE("defaults, and empty or comment-only files", "[spec]") {
  for (const char* text : {"", "# nothing here\n", "~\n"}) {
    const auto r = resolve_ok(text);
    const auto& s = r.spec;
    CHECK(s.accelerator_type.value.empty());
    CHECK(s.accelerator_type.is_default());
    CHECK_FALSE(s.num_accelerators.value.has_value());
    CHECK(s.cpu_ranks.value == 1);
    CHECK_FALSE(s.timeout.value.has_value()); // no wall-clock limit unless asked for
    CHECK(s.grace_period.value == Millis(30'000));
    CHECK(s.python.value == "python3");
    CHECK(s.master_addr.value == "127.0.0.1");
    CHECK(s.master_port.value == 0);
    CHECK(s.tail_lines.value == 50);
    CHECK(s.command.value.empty()); // the CLI, not resolve_spec, requires a command
    CHECK(r.warnings.empty());
  }
  air::SpecInputs no_file; // no -f at all
  CHECK(resolve_ok(no_file).spec.spec_path.empty());
}

TEST_CASE("no command line has a timeout unless one is asked for", "[spec]") {
  // air-run's own words and a torchrun line alike: a wall-clock limit would
  // end a multi-day job with 124; the hang detector is the safety net.
  auto own = resolve_ok(air::SpecInputs{});
  CHECK_FALSE(own.spec.timeout.value.has_value());
  CHECK(own.spec.timeout.origin.describe() == "default");
  CHECK(own.spec.timeout.is_default());
  // Asked for anywhere: kept, with its origin.
  air::SpecInputs asked;
  asked.flags = {{"timeout", "90m", "--timeout"}};
  auto r = resolve_ok(asked);
  CHECK(r.spec.timeout.value == std::optional<Millis>(Millis(90 * 60 * 1000)));
  CHECK(r.spec.timeout.origin.describe() == "flag --timeout");
  auto from_file = inputs_from("timeout: 2h\n", {});
  CHECK(resolve_ok(from_file).spec.timeout.value == std::optional<Millis>(Millis(2 * 3600 * 1000)));
}

TEST_CASE("the installed environment's Python is the default interpreter, with its reason", "[spec]") {
  air::SpecInputs in;
  in.default_python = "/v/bin/python3";
  in.default_python_why = "the Python environment air-run is installed in (/v)";
  auto r = resolve_ok(in);
  CHECK(r.spec.python.value == "/v/bin/python3");
  CHECK(r.spec.python.is_default());
  CHECK(r.spec.python.origin.describe() == "default, the Python environment air-run is installed in (/v)");
  in.environment = {{"AIR_RUN_PYTHON", "/usr/bin/python3"}};
  r = resolve_ok(in);
  CHECK(r.spec.python.value == "/usr/bin/python3");
  CHECK(r.spec.python.origin.describe() == "env AIR_RUN_PYTHON");
}

TEST_CASE("describe_spec prints key = value (origin) in table order", "[spec]") {
  const auto r =
      resolve_ok(inputs_from("timeout: none\ncommand: a.py\nenvironment:\n  dependencies: req.txt\n",
                             {{"AIR_RUN_GRACE_PERIOD", "5s"}}, {{"master_port", "29999", "--master-port"}}));
  const std::vector<std::string> expected = {
      "accelerator_type = auto  (default)",
      "num_accelerators = auto  (default)",
      "cpu_ranks = 1  (default)",
      "timeout = none  (job.yaml:1:1)",
      "grace_period = 5s  (env AIR_RUN_GRACE_PERIOD)",
      "hang_timeout = 5m  (default)",
      "hang_startup = 1m  (default)",
      "on_hang = report  (default)",
      "environment.python = python3  (default)",
      "environment.dependencies = -r req.txt  (job.yaml:4:3)",
      "environment.find_links = []  (default)",
      "environment.index_url = \"\"  (default)",
      "environment.no_index = false  (default)",
      "environment.system_site_packages = true  (default)",
      "env_cache_dir = default  (default)",
      "rebuild_env = false  (default)",
      "env = {}  (default)",
      "command = [a.py]  (job.yaml:2:1)",
      "module = false  (default)",
      "no_python = false  (default)",
      "master_addr = 127.0.0.1  (default)",
      "master_port = 29999  (flag --master-port)",
      "nnodes = 1  (default)",
      "node_rank = 0  (default)",
      "join_timeout = 5m  (default)",
      "control_port = 0  (default)",
      "max_restarts = 0  (default)",
      "checkpoint_dir = \"\"  (default)",
      "preload = [auto]  (default)",
      "rdzv_backend = static  (default)",
      "rdzv_endpoint = \"\"  (default)",
      "rdzv_id = \"\"  (default)",
      "rdzv_conf = \"\"  (default)",
      "standalone = false  (default)",
      "log_dir = \"\"  (default)",
      "console_ranks = all  (default)",
      "isolate_gpus = false  (default)",
      "run_id = \"\"  (default)",
      "summary_file = \"\"  (default)",
      "json = false  (default)",
      "html = \"\"  (default)",
      "junit_file = \"\"  (default)",
      "tail_lines = 50  (default)",
      "mlflow.tracking_uri = none  (default)",
      "mlflow.experiment = default  (default)",
      "mlflow.run_name = default  (default)",
      "mlflow.tags = {}  (default)",
      "mlflow.required = false  (default)",
      "mlflow.timeout = 15s  (default)",
      "no_prefix = false  (default)",
      "nproc_per_node = none  (default)",
      "role = default  (default)",
      "redirects = 0  (default)",
      "tee = 0  (default)",
      "local_ranks_filter = all  (default)",
      "numa_binding = none  (default)",
      "signals_to_handle = default  (default)",
      "duplicate_stdout_filters = none  (default)",
      "duplicate_stderr_filters = none  (default)",
      "virtual_local_rank = false  (default)",
      "live = true  (default)",
      "quiet = false  (default)",
      "stdin = auto  (default)",
      "timestamps = false  (default)",
  };
  CHECK(air::describe_spec(r.spec) == expected);
  CHECK(r.spec.requirements_file.value == "req.txt");
  CHECK(r.spec.dependencies.value.empty());
}

TEST_CASE("bad files give exact file:line:col: key: messages", "[spec]") {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"num_accelerators: 2\ntimout: 90m\n", "job.yaml:2:1: unknown key 'timout' (did you mean 'timeout'?)"},
      {"environment:\n  pyton: x\n",
       "job.yaml:2:3: unknown key 'environment.pyton' (did you mean 'environment.python'?)"},
      {"python: x\n", "job.yaml:1:1: unknown key 'python' (did you mean 'environment.python'?)"},
      {"gpu: 2\n", "job.yaml:1:1: unknown key 'gpu' (did you mean 'num_accelerators'?)"},
      {"frobnicate: 1\n", "job.yaml:1:1: unknown key 'frobnicate'"},
      {"timeout: soon\n", "job.yaml:1:10: timeout: expected a duration like 90m, 3h or none, got 'soon'"},
      {"grace_period: none\n",
       "job.yaml:1:15: grace_period: expected a duration like 30s, 90m or 3h, got 'none'"},
      {"command: a.py\non_hang: kill\n", "job.yaml:2:1: on_hang: 'kill' is not one of report, stop"},
      {"timeout: 0\n", "job.yaml:1:10: timeout: must be greater than zero (use none for no limit), got '0'"},
      {"timeout: -5m\n", "job.yaml:1:10: timeout: expected a duration like 90m, 3h or none, got '-5m'"},
      {"timeout:\n", "job.yaml:1:1: timeout: expected a duration like 90m, 3h or none, got nothing"},
      {"timeout: [1]\n", "job.yaml:1:10: timeout: expected a duration like 90m, 3h or none, got a list"},
      {"num_accelerators: eight\n", "job.yaml:1:19: num_accelerators: expected a whole number, got 'eight'"},
      {"num_accelerators: 8.5\n", "job.yaml:1:19: num_accelerators: expected a whole number, got '8.5'"},
      {"num_accelerators: 0\n", "job.yaml:1:19: num_accelerators: must be between 1 and 4096, got 0"},
      {"cpu_ranks: -1\n", "job.yaml:1:12: cpu_ranks: must be between 1 and 4096, got -1"},
      {"cpu_ranks: 2147483647\n", "job.yaml:1:12: cpu_ranks: must be between 1 and 4096, got 2147483647"},
      {"tail_lines: -1\n", "job.yaml:1:13: tail_lines: must be between 0 and 1000000, got -1"},
      {"master_port: 70000\n", "job.yaml:1:14: master_port: must be between 0 and 65535, got 70000"},
      {"master_port: 99999999999999999999\n",
       "job.yaml:1:14: master_port: must be between 0 and 65535, got 99999999999999999999"},
      {"json: yes\n", "job.yaml:1:7: json: expected true or false, got 'yes'"},
      {"isolate_gpus: {a: 1}\n", "job.yaml:1:15: isolate_gpus: expected true or false, got a mapping"},
      {"master_addr: ''\n", "job.yaml:1:14: master_addr: must not be empty"},
      {"run_id: a/b\n",
       "job.yaml:1:9: run_id: may contain only letters, digits, '.', '_' and '-', got 'a/b'"},
      {"env: [A]\n", "job.yaml:1:6: env: expected a mapping of NAME: value, got a list"},
      {"env:\n  BAD-NAME: 1\n", "job.yaml:2:3: env: invalid variable name 'BAD-NAME'"},
      {"env:\n  A: [1]\n", "job.yaml:2:6: env.A: expected a string, got a list"},
      {"command: {a: 1}\n", "job.yaml:1:10: command: expected a list of strings, got a mapping"},
      {"command:\n  - a\n  - [b]\n", "job.yaml:3:5: command: expected a list of strings, got a list"},
      {"command: \"train.py 'x\"\n", "job.yaml:1:10: command: unterminated quote in 'train.py 'x'"},
      {"console_ranks: 3-1\n", "job.yaml:1:16: console_ranks: range '3-1' goes backwards"},
      {"console_ranks: [0, x]\n", "job.yaml:1:20: console_ranks: expected ranks like 0,2-3, got 'x'"},
      {"environment: python3\n", "job.yaml:1:14: environment: expected a mapping, got 'python3'"},
      {"timeout: 1h\nnum_accelerators: 2\ntimeout: 2h\n",
       "job.yaml:3:1: timeout: duplicate key (first given at job.yaml:1:1)"},
      {"env:\n  A: 1\nenv_variables:\n  B: 2\n",
       "job.yaml:3:1: env_variables: also given as 'env' at job.yaml:1:1; keep only one"},
      {"gpus: 2\nnum_accelerators: 3\n",
       "job.yaml:2:1: num_accelerators: also given as 'gpus' at job.yaml:1:1; remove the deprecated 'gpus'"},
      {"accelerator_type: CPU\ngpu_type: GPU_1xA10\n",
       "job.yaml:2:1: gpu_type: also given as 'accelerator_type' at job.yaml:1:1; remove the deprecated "
       "'gpu_type'"},
      {"module: true\nno_python: true\n",
       "job.yaml:2:1: no_python: cannot be used together with module (job.yaml:1:1)"},
      {"accelerator_type: GPU_x\n",
       "job.yaml:1:19: accelerator_type: expected CPU or GPU_<n>x<MODEL> (like GPU_8xH100), got 'GPU_x'"},
      {"accelerator_type: GPU_0xH100\n",
       "job.yaml:1:19: accelerator_type: count must be at least 1, got 'GPU_0xH100'"},
      {"accelerator_type: TPU\n",
       "job.yaml:1:19: accelerator_type: expected CPU or GPU_<n>x<MODEL> (like GPU_8xH100), got 'TPU'"},
      {"accelerator_type: GPU_8x\n",
       "job.yaml:1:19: accelerator_type: expected CPU or GPU_<n>x<MODEL> (like GPU_8xH100), got 'GPU_8x'"},
      // YAML syntax errors keep yaml-cpp's mark, made 1-based.
      // The syntax errors read as libyaml says them; yaml-cpp's words without it.
      {"timeout: 3h: x\n", air::yaml_syntax_is_strict()
                               ? "job.yaml:1:12: invalid YAML: mapping values are not allowed in this context"
                               : "job.yaml:1:12: invalid YAML: illegal map value"},
      {"command: [a, b\n",
       air::yaml_syntax_is_strict()
           ? "job.yaml:2:1: invalid YAML: did not find expected ',' or ']' (while parsing a flow "
             "sequence that starts at 1:10)"
           : "job.yaml:2:1: invalid YAML: end of sequence flow not found"},
      {"- a\n- b\n", "job.yaml:1:1: expected a mapping of keys at the top level, got a list"},
      {"just text\n", "job.yaml:1:1: expected a mapping of keys at the top level, got 'just text'"},
      {"timeout: 1h\n---\ntimeout: 2h\n",
       "job.yaml:2:1: expected one YAML document, found another (a '---' line or a stray token)"},
      {",", air::yaml_syntax_is_strict()
                ? "job.yaml:1:1: invalid YAML: did not find expected node content (while parsing a block "
                  "node that "
                  "starts at 1:1)"
                : "job.yaml:1:1: expected one YAML document, found another (a '---' line or a stray token)"},
  };
  for (const auto& c : cases) {
    INFO(c.yaml);
    CHECK(resolve_error(c.yaml) == c.message);
  }
}

TEST_CASE("variables and flags name themselves in errors", "[spec]") {
  CHECK(resolve_error("", {{"AIR_RUN_TIMEOUT", "soon"}}) ==
        "environment variable AIR_RUN_TIMEOUT: expected a duration like 90m, 3h or none, got 'soon'");
  CHECK(resolve_error("", {{"AIR_RUN_NUM_ACCELERATORS", "0"}}) ==
        "environment variable AIR_RUN_NUM_ACCELERATORS: must be between 1 and 4096, got 0");
  CHECK(resolve_error("", {{"AIR_RUN_JSON", "maybe"}}) ==
        "environment variable AIR_RUN_JSON: expected true or false (or 1/0, yes/no), got 'maybe'");
  CHECK(resolve_error("", {}, {{"timeout", "soon", "--timeout"}}) ==
        "--timeout: expected a duration like 90m, 3h or none, got 'soon'");
  CHECK(resolve_error("", {}, {{"num_accelerators", "two", "-n"}}) ==
        "-n: expected a whole number, got 'two'");
  CHECK(resolve_error("", {}, {{"env", "NOEQUALS", "--env"}}) == "--env: expected KEY=VALUE, got 'NOEQUALS'");
  CHECK(resolve_error("", {}, {{"env", "1X=2", "--env"}}) == "--env: invalid variable name '1X'");
  CHECK(resolve_error("", {}, {{"console_ranks", "0,,1", "--ranks"}}) ==
        "--ranks: expected ranks like 0,2-3, got '0,,1'");
  CHECK(resolve_error("", {}, {{"accelerator_type", "GPU_8xH100!", "--accelerator-type"}}) ==
        "--accelerator-type: expected CPU or GPU_<n>x<MODEL> (like GPU_8xH100), got 'GPU_8xH100!'");
  CHECK(resolve_error("", {}, {{"module", "true", "--module"}, {"no_python", "true", "--no-python"}}) ==
        "--no-python: cannot be used together with module (flag --module)");
  // module from the file, no_python from a flag: the flag is named, and the file line.
  CHECK(resolve_error("module: true\n", {}, {{"no_python", "", "--no-python"}}) ==
        "--no-python: cannot be used together with module (job.yaml:1:1)");
  CHECK(resolve_error("", {}, {{"bogus", "1", "--bogus"}}) == "--bogus: unknown spec key 'bogus'");
}

TEST_CASE("booleans: strict in YAML, shell-friendly in flags and variables", "[spec]") {
  CHECK(resolve_ok("json: false\n").spec.json.value == false);
  CHECK(resolve_ok("json: True\n").spec.json.value == true);
  for (const char* yes : {"true", "1", "yes", "YES", "True"}) {
    INFO(yes);
    CHECK(resolve_ok("", {{"AIR_RUN_ISOLATE_GPUS", yes}}).spec.isolate_gpus.value);
    CHECK(resolve_ok("", {}, {{"json", yes, "--json"}}).spec.json.value);
  }
  for (const char* no : {"false", "0", "no", "No"}) {
    INFO(no);
    CHECK_FALSE(resolve_ok("isolate_gpus: true\n", {{"AIR_RUN_ISOLATE_GPUS", no}}).spec.isolate_gpus.value);
  }
  CHECK(resolve_ok("", {}, {{"module", "", "-m"}}).spec.module.value); // a bare flag
  CHECK(resolve_error("", {{"AIR_RUN_JSON", ""}}) ==
        "environment variable AIR_RUN_JSON: expected true or false (or 1/0, yes/no), got ''");
}

TEST_CASE("precedence: flag > env > file > default, with origins", "[spec]") {
  const std::string yaml = "timeout: 1h\ngrace_period: 10s\ntail_lines: 5\nmaster_port: 1000\n";
  const air::Environment env = {{"AIR_RUN_TIMEOUT", "2h"}, {"AIR_RUN_GRACE_PERIOD", "20s"}, {"PATH", "/bin"}};
  const Flags flags = {{"timeout", "3h", "--timeout"}, {"timeout", "4h", "--timeout"}};
  const auto s = resolve_ok(yaml, env, flags).spec;

  CHECK(s.timeout.value == std::optional<Millis>(Millis(4 * 3600 * 1000))); // last flag wins
  CHECK(s.timeout.origin.kind == Origin::Kind::flag);
  CHECK(where(s.timeout.origin) == "flag --timeout");
  CHECK(s.grace_period.value == Millis(20'000));
  CHECK(where(s.grace_period.origin) == "env AIR_RUN_GRACE_PERIOD");
  CHECK(s.tail_lines.value == 5);
  CHECK(where(s.tail_lines.origin) == "job.yaml:3:1");
  CHECK(s.master_port.value == 1000);
  CHECK(s.cpu_ranks.value == 1);
  CHECK(where(s.cpu_ranks.origin) == "default");

  // The same keys without the flags: env beats the file.
  const auto s2 = resolve_ok(yaml, env).spec;
  CHECK(s2.timeout.value == std::optional<Millis>(Millis(2 * 3600 * 1000)));
  CHECK(where(s2.timeout.origin) == "env AIR_RUN_TIMEOUT");
  // A flag "none" beats a file value.
  CHECK_FALSE(resolve_ok(yaml, {}, {{"timeout", "none", "--timeout"}}).spec.timeout.value.has_value());
}

TEST_CASE("env merges per variable; lists are replaced; repeated flags accumulate", "[spec]") {
  const auto s = resolve_ok("env:\n  A: file\n  B: file\ncommand: [from_file.py]\nconsole_ranks: [1]\n", {},
                            {{"env", "B=flag", "--env"},
                             {"env", "C=x=y", "--env"},
                             {"console_ranks", "0", "--ranks"},
                             {"console_ranks", "2-3", "--ranks"}})
                     .spec;
  CHECK(s.env.value == std::map<std::string, std::string>{{"A", "file"}, {"B", "flag"}, {"C", "x=y"}});
  CHECK(where(s.env.origin) == "flag --env");
  CHECK(s.console_ranks.value == std::vector<int>{0, 2, 3});
  CHECK(s.command.value == std::vector<std::string>{"from_file.py"});

  // Trailing command-line arguments replace the file's command.
  const auto r = resolve_ok(inputs_from("command: [from_file.py, --x]\n", {}, {}, {"cli.py", "--lr", "1"}));
  CHECK(r.spec.command.value == std::vector<std::string>{"cli.py", "--lr", "1"});
  CHECK(r.spec.command.origin.kind == Origin::Kind::flag);
  CHECK(where(r.spec.command.origin) == "command line");
}

TEST_CASE("command given as one string is split like a shell would", "[spec]") {
  const auto s = resolve_ok("command: train.py --name 'a b' \"c \\\"d\\\"\" e\\ f ''\n").spec;
  CHECK(s.command.value == std::vector<std::string>{"train.py", "--name", "a b", "c \"d\"", "e f", ""});
  auto words = air::split_command_line("  -m   pkg.mod\t--flag=\"x y\"  ", "cmd");
  REQUIRE(words.ok());
  CHECK(*words == std::vector<std::string>{"-m", "pkg.mod", "--flag=x y"});
  CHECK(air::split_command_line("", "cmd")->empty());
  auto bad = air::split_command_line("a \"b", "cmd");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "cmd: unterminated quote in 'a \"b'");
}

TEST_CASE("legacy names warn and still work", "[spec]") {
  SECTION("file") {
    const auto r = resolve_ok("gpus: 2\ngpu_type: h100\n");
    CHECK(r.spec.num_accelerators.value == std::optional<int>(2));
    CHECK(where(r.spec.num_accelerators.origin) == "job.yaml:1:1");
    CHECK(r.spec.accelerator_type.value == "H100");
    CHECK(r.warnings ==
          std::vector<std::string>{
              "air-run: warning: job.yaml:1:1: 'gpus' is deprecated, use 'num_accelerators'",
              "air-run: warning: job.yaml:2:1: 'gpu_type' is deprecated, use 'accelerator_type'",
              "air-run: warning: job.yaml:2:11: gpu_type: 'h100' is deprecated, use 'GPU_<n>xH100'",
          });
  }
  SECTION("short accelerator values under the new key") {
    const auto r = resolve_ok("accelerator_type: B300\n");
    CHECK(r.spec.accelerator_type.value == "B300");
    CHECK(r.warnings == std::vector<std::string>{
                            "air-run: warning: job.yaml:1:19: accelerator_type: 'B300' is deprecated, use "
                            "'GPU_<n>xB300'"});
  }
  SECTION("flags") {
    const auto r = resolve_ok("", {}, {{"gpus", "2", "--gpus"}, {"gpu_type", "GPU_2xA10", "--gpu-type"}});
    CHECK(r.spec.num_accelerators.value == std::optional<int>(2));
    CHECK(where(r.spec.num_accelerators.origin) == "flag --gpus");
    CHECK(r.spec.accelerator_type.value == "GPU_2xA10");
    CHECK(r.warnings ==
          std::vector<std::string>{"air-run: warning: '--gpus' is deprecated, use '--num-accelerators'",
                                   "air-run: warning: '--gpu-type' is deprecated, use '--accelerator-type'"});
    CHECK(resolve_error("", {}, {{"gpus", "2", "--gpus"}, {"num_accelerators", "3", "--num-accelerators"}}) ==
          "--num-accelerators: also given as '--gpus'; remove the deprecated '--gpus'");
    CHECK(resolve_error("", {}, {{"num_accelerators", "3", "--num-accelerators"}, {"gpus", "2", "--gpus"}}) ==
          "--gpus: also given as '--num-accelerators'; remove the deprecated '--gpus'");
    CHECK(resolve_error("", {}, {{"gpus", "0", "--gpus"}}) == "--gpus: must be between 1 and 4096, got 0");
  }
  SECTION("variables") {
    const auto r = resolve_ok("", {{"AIR_RUN_GPUS", "4"}});
    CHECK(r.spec.num_accelerators.value == std::optional<int>(4));
    CHECK(where(r.spec.num_accelerators.origin) == "env AIR_RUN_GPUS");
    CHECK(r.warnings == std::vector<std::string>{"air-run: warning: environment variable AIR_RUN_GPUS is "
                                                 "deprecated, use AIR_RUN_NUM_ACCELERATORS"});
    CHECK(resolve_error("", {{"AIR_RUN_GPUS", "2"}, {"AIR_RUN_NUM_ACCELERATORS", "3"}}) ==
          "environment variable AIR_RUN_GPUS: also given as AIR_RUN_NUM_ACCELERATORS; remove the deprecated "
          "AIR_RUN_GPUS");
  }
  SECTION("legacy in one source, new name in another is fine") {
    const auto r = resolve_ok("gpus: 2\n", {}, {{"num_accelerators", "4", "--num-accelerators"}});
    CHECK(r.spec.num_accelerators.value == std::optional<int>(4));
    CHECK(r.warnings.size() == 1);
  }
}

TEST_CASE("accelerator types are normalised lexically", "[spec]") {
  const auto type_of = [](const char* text) {
    return resolve_ok("", {}, {{"accelerator_type", text, "--accelerator-type"}}).spec.accelerator_type.value;
  };
  CHECK(type_of("CPU") == "CPU");
  CHECK(type_of("cpu") == "CPU");
  CHECK(type_of("GPU_8xH100") == "GPU_8xH100");
  CHECK(type_of("gpu_8xh100") == "GPU_8xH100");
  CHECK(type_of("GPU_08XH200") == "GPU_8xH200");
  CHECK(type_of("GPU_1xL40S") == "GPU_1xL40S");
  CHECK(type_of("a10") == "A10");
}

TEST_CASE("durations parse and format", "[spec][duration]") {
  const auto ms = [](const char* text) {
    auto d = air::parse_duration(text, "t");
    INFO(text);
    REQUIRE(d.ok());
    return d->count();
  };
  CHECK(ms("30") == 30'000);
  CHECK(ms("30s") == 30'000);
  CHECK(ms("1500ms") == 1500);
  CHECK(ms("90m") == 5'400'000);
  CHECK(ms("3h") == 10'800'000);
  CHECK(ms("1h30m") == 5'400'000);
  CHECK(ms("1h30m15s500ms") == 5'415'500);
  CHECK(ms("1.5s") == 1500);
  CHECK(ms("0.1h") == 360'000);
  CHECK(ms("0") == 0);
  for (const char* bad :
       {"", "soon", "1h30", "30m1h", "1hh", "-5s", "1.s", ".s", "5 s", "1d", "none", "1e3"}) {
    INFO(bad);
    auto d = air::parse_duration(bad, "--grace-period");
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().message ==
          "--grace-period: expected a duration like 30s, 90m or 3h, got '" + std::string(bad) + "'");
  }
  auto huge = air::parse_duration("9000h", "t");
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.error().message == "t: duration '9000h' is too long (at most 8760h)");
  CHECK_FALSE(air::parse_duration("99999999999999s", "t").ok());

  CHECK_FALSE(air::parse_opt_duration("none", "t")->has_value());
  CHECK(air::parse_opt_duration("2m", "t")->value() == Millis(120'000));
  CHECK(air::parse_opt_duration("never", "t").error().message ==
        "t: expected a duration like 90m, 3h or none, got 'never'");

  CHECK(air::format_duration(Millis(3 * 3600 * 1000)) == "3h");
  CHECK(air::format_duration(Millis(5'400'000)) == "90m");
  CHECK(air::format_duration(Millis(30'000)) == "30s");
  CHECK(air::format_duration(Millis(1500)) == "1.5s");
  CHECK(air::format_duration(Millis(61'250)) == "61.25s");
  CHECK(air::format_duration(Millis(250)) == "250ms");
  CHECK(air::format_duration(Millis(0)) == "0s");
  for (long v : {1L, 999L, 1000L, 1001L, 59'999L, 60'000L, 3'599'999L, 3'600'000L, 86'400'000L}) {
    INFO(v);
    CHECK(air::parse_duration(air::format_duration(Millis(v)), "t")->count() == v);
  }
}

TEST_CASE("rank lists parse and format", "[spec][ranks]") {
  CHECK(*air::parse_rank_list("0,2-3", "r") == std::vector<int>{0, 2, 3});
  CHECK(*air::parse_rank_list("3, 1 ,1-2", "r") == std::vector<int>{1, 2, 3});
  CHECK(*air::parse_rank_list("5", "r") == std::vector<int>{5});
  CHECK(air::parse_rank_list("", "r")->empty());
  CHECK(air::parse_rank_list("all", "r")->empty());
  for (const char* bad : {"x", "1,", ",1", "-1", "1-", "1-2-3", "1.5", "a-b"}) {
    INFO(bad);
    auto r = air::parse_rank_list(bad, "--ranks");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "--ranks: expected ranks like 0,2-3, got '" + std::string(bad) + "'");
  }
  CHECK(air::parse_rank_list("4-2", "r").error().message == "r: range '4-2' goes backwards");
  CHECK(air::parse_rank_list("0-2000000", "r").error().message ==
        "r: rank 2000000 is too large (at most 1000000)");

  CHECK(air::format_rank_list({0, 2, 3}) == "0,2-3");
  CHECK(air::format_rank_list({0, 1, 2, 3, 7, 9, 10}) == "0-3,7,9-10");
  CHECK(air::format_rank_list({}).empty());
  const std::vector<int> ranks = {1, 4, 5, 6, 8};
  CHECK(*air::parse_rank_list(air::format_rank_list(ranks), "r") == ranks);
}

TEST_CASE("Origin::describe", "[spec]") {
  CHECK(Origin{}.describe() == "default");
  CHECK((Origin{Origin::Kind::file, "job.yaml:7:3"}).describe() == "job.yaml:7:3");
  CHECK((Origin{Origin::Kind::env, "AIR_RUN_TIMEOUT"}).describe() == "env AIR_RUN_TIMEOUT");
  CHECK((Origin{Origin::Kind::flag, "--timeout"}).describe() == "flag --timeout");
  CHECK((Origin{Origin::Kind::flag, ""}).describe() == "command line");
}

// tests/specs/good/*.yaml must resolve; each tests/specs/bad/*.yaml starts
// with "# error: <exact message>" (file named by its base name).
TEST_CASE("example specs in tests/specs", "[spec]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(AIR_TEST_DATA_DIR) / "specs";
  int good = 0;
  int bad = 0;
  for (const auto& entry : fs::directory_iterator(root / "good")) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    air::SpecInputs inputs;
    inputs.file_text = text.str();
    inputs.file_path = entry.path().filename().string();
    INFO(inputs.file_path);
    const auto r = resolve_ok(inputs);
    CHECK(r.warnings.empty());
    CHECK_FALSE(r.spec.command.value.empty());
    ++good;
  }
  for (const auto& entry : fs::directory_iterator(root / "bad")) {
    std::ifstream in(entry.path());
    std::string first;
    std::getline(in, first);
    std::stringstream rest;
    rest << in.rdbuf();
    REQUIRE(first.rfind("# error: ", 0) == 0);
    air::SpecInputs inputs;
    inputs.file_text = first + "\n" + rest.str();
    inputs.file_path = entry.path().filename().string();
    INFO(inputs.file_path);
    CHECK(resolve_error(inputs) == first.substr(9));
    ++bad;
  }
  CHECK(good >= 2);
  CHECK(bad >= 3);
}

namespace {
std::string read_whole(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
} // namespace

// tests/specs/malformed/ holds YAML that a conforming parser refuses (the e2e
// test test_spec_yaml.sh checks PyYAML refuses each); yaml-cpp alone accepted
// about half of them. tests/specs/wellformed/ holds tricky YAML that is fine.
TEST_CASE("malformed YAML is refused with its place, well-formed YAML is read", "[spec]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(AIR_TEST_DATA_DIR) / "specs";
  int malformed = 0;
  if (!air::yaml_syntax_is_strict()) WARN("built without libyaml: the malformed specs are not checked");
  for (const auto& entry : fs::directory_iterator(root / "malformed")) {
    if (!air::yaml_syntax_is_strict()) break;
    air::SpecInputs inputs;
    inputs.file_text = read_whole(entry.path());
    inputs.file_path = entry.path().filename().string();
    INFO(inputs.file_path);
    const std::string error = resolve_error(inputs);
    CHECK(error.rfind(inputs.file_path + ":", 0) == 0);
    const bool yaml_error = error.find(": invalid YAML: ") != std::string::npos ||
                            error.find(": expected one YAML document") != std::string::npos;
    CHECK(yaml_error);
    ++malformed;
  }
  CHECK((malformed >= 30 || !air::yaml_syntax_is_strict()));
  int wellformed = 0;
  for (const auto& entry : fs::directory_iterator(root / "wellformed")) {
    air::SpecInputs inputs;
    inputs.file_text = read_whole(entry.path());
    inputs.file_path = entry.path().filename().string();
    INFO(inputs.file_path);
    const auto r = resolve_ok(inputs);
    CHECK(r.spec.command.value.size() == 3);
    ++wellformed;
  }
  CHECK(wellformed >= 15);
}

TEST_CASE("an unclosed quote does not swallow the keys after it", "[spec]") {
  if (!air::yaml_syntax_is_strict()) return;
  air::SpecInputs inputs;
  inputs.file_text = "command: \"unterminated.py\ntimeout: 5m\n";
  inputs.file_path = "job.yaml";
  CHECK(resolve_error(inputs) ==
        "job.yaml:3:1: invalid YAML: found unexpected end of stream (while scanning a quoted scalar that "
        "starts at 1:10)");
  inputs.file_text = "command: *target\n";
  CHECK(resolve_error(inputs) ==
        "job.yaml:1:10: invalid YAML: alias *target names no anchor defined before it");
}

TEST_CASE("lists and mappings nested past 64 levels are refused where the 65th opens", "[spec]") {
  if (!air::yaml_syntax_is_strict()) return;
  air::SpecInputs inputs;
  inputs.file_path = "job.yaml";
  // The top-level mapping is the first level: 63 lists under it are 64 levels.
  inputs.file_text = "command: " + std::string(63, '[') + std::string(63, ']') + "\n";
  CHECK(resolve_error(inputs).find("nested deeper") == std::string::npos);
  inputs.file_text = "command: " + std::string(64, '[') + std::string(64, ']') + "\n";
  CHECK(resolve_error(inputs) == "job.yaml:1:73: invalid YAML: nested deeper than 64 levels");
  std::string map = "command: ";
  for (int i = 0; i < 20000; ++i) map += "{a: ";
  inputs.file_text = map + "1" + std::string(20000, '}') + "\n";
  CHECK(resolve_error(inputs) == "job.yaml:1:262: invalid YAML: nested deeper than 64 levels");
  // Block lists nest too: "- - - x" is three levels.
  std::string block;
  for (int i = 0; i < 100; ++i) block += "- ";
  inputs.file_text = block + "x\n";
  CHECK(resolve_error(inputs) == "job.yaml:1:129: invalid YAML: nested deeper than 64 levels");
}

TEST_CASE("numa_binding and signals_to_handle are checked where they were given", "[spec][torchrun]") {
  CHECK(resolve_error("numa_binding: gpu\n") ==
        "job.yaml:1:1: numa_binding: expected node, socket, exclusive, core-complex or none, got 'gpu'");
  CHECK(resolve_error("", {{"AIR_RUN_NUMA_BINDING", "Node"}}) ==
        "environment variable AIR_RUN_NUMA_BINDING: expected node, socket, exclusive, core-complex or none, "
        "got 'Node'");
  CHECK(resolve_error("", {}, {{"numa_binding", "sockets", "--numa-binding"}}).rfind("--numa-binding: ", 0) ==
        0);
  CHECK(resolve_error("", {}, {{"signals_to_handle", "SIGTERM,USR1", "--signals-to-handle"}}) ==
        "--signals-to-handle: 'USR1' is not a signal air-run forwards (did you mean SIGUSR1?); use SIG names "
        "from SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, comma separated");
  CHECK(
      resolve_error("signals_to_handle: SIGKILL\n").rfind("job.yaml:1:1: signals_to_handle: 'SIGKILL'", 0) ==
      0);
  const auto ok = resolve_ok("", {},
                             {{"numa_binding", "exclusive", "--numa-binding"},
                              {"signals_to_handle", "SIGUSR1", "--signals-to-handle"}});
  CHECK(ok.spec.numa_binding.value == "exclusive");
  CHECK(ok.spec.signals_to_handle.value == "SIGUSR1");
  // Not given: none, and air-run's own signal handling.
  const auto plain = resolve_ok("");
  CHECK(plain.spec.numa_binding.value == "none");
  CHECK(plain.spec.signals_to_handle.value.empty());
}

TEST_CASE("preload: module names from flags, variables and files, commas split, none clears", "[spec]") {
  // Unset: auto (core/warm/warm_choice.hpp decides); given, as given; none: off.
  CHECK(resolve_ok("").spec.preload.value == std::vector<std::string>{"auto"});
  CHECK(resolve_ok("preload: []\n").spec.preload.value.empty());
  CHECK(resolve_ok("", {{"AIR_RUN_PRELOAD", "none"}}).spec.preload.value.empty());
  CHECK(resolve_ok("preload: [torch]\n", {}, {{"preload", "auto", "--preload"}}).spec.preload.value ==
        std::vector<std::string>{"auto"});
  CHECK(resolve_error("", {}, {{"preload", "auto,numpy", "--preload"}}) ==
        "--preload: auto lets air-run choose the modules; name 'numpy' without it (like torch,numpy), or use "
        "auto alone");
  CHECK(resolve_ok("preload: [torch, numpy]\n").spec.preload.value ==
        std::vector<std::string>{"torch", "numpy"});
  CHECK(resolve_ok("", {{"AIR_RUN_PRELOAD", "torch, torch.distributed"}}).spec.preload.value ==
        std::vector<std::string>{"torch", "torch.distributed"});
  // A flag repeats, each may hold several; a name given twice counts once.
  CHECK(resolve_ok("", {}, {{"preload", "torch,numpy", "--preload"}, {"preload", "torch", "--preload"}})
            .spec.preload.value == std::vector<std::string>{"torch", "numpy"});
  // `none` turns off what came before it, such as a file's list.
  CHECK(resolve_ok("preload: [torch]\n", {}, {{"preload", "none", "--preload"}}).spec.preload.value.empty());
  CHECK(resolve_error("", {}, {{"preload", "torch;rm", "--preload"}}) ==
        "--preload: 'torch;rm' is not a Python module name (like torch or torch.distributed)");
  CHECK(resolve_error("preload:\n  - torch\n  - 2fast\n") ==
        "job.yaml:1:1: preload: '2fast' is not a Python module name (like torch or torch.distributed)");
  for (const char* bad : {"torch.", ".torch", "a..b", "torch/x", "torch-x"})
    CHECK_FALSE(air::resolve_spec(inputs_from("", {{"AIR_RUN_PRELOAD", bad}})).ok());
}
