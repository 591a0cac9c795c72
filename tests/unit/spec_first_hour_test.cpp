// Settings a new user gets wrong in the first hour, said out loud: paths of a
// spec file relative to it, rank filters naming ranks the run lacks, env
// entries air-run overrides, AIR_RUN_* typos.
#include "core/run/plan.hpp"
#include "core/spec/ignored_settings.hpp"
#include "core/spec/spec.hpp"
#include "core/spec/spec_paths.hpp"
#include "tests/unit/catch.hpp"

#include <string>
#include <tuple>
#include <vector>

namespace {

air::LaunchSpec first_hour_spec_ok(air::SpecInputs in) {
  auto resolved = air::resolve_spec(in);
  REQUIRE(resolved.ok());
  return resolved->spec;
}

air::LaunchSpec from_file(const std::string& yaml, const std::string& path,
                          std::vector<std::tuple<std::string, std::string, std::string>> flags = {}) {
  air::SpecInputs in;
  in.file_text = yaml;
  in.file_path = path;
  in.flags = std::move(flags);
  return first_hour_spec_ok(in);
}

} // namespace

TEST_CASE("paths written in a spec file are relative to it", "[spec]") {
  auto spec =
      from_file("command: [train.py]\nlog_dir: logs\nsummary_file: out/s.json\njunit_file: ../j.xml\n"
                "env_cache_dir: envs\ncheckpoint_dir: ckpt\nenvironment:\n  python: .venv/bin/python\n",
                "configs/job.yaml");
  air::anchor_spec_paths(spec);
  CHECK(spec.command.value.front() == "configs/train.py");
  CHECK(spec.log_dir.value == "configs/logs");
  CHECK(spec.summary_file.value == "configs/out/s.json");
  CHECK(spec.junit_file.value == "j.xml");
  CHECK(spec.env_cache_dir.value == "configs/envs");
  CHECK(spec.checkpoint_dir.value == "configs/ckpt");
  CHECK(spec.python.value == "configs/.venv/bin/python");
}

TEST_CASE("flags, absolute paths, program names and stdin specs keep their paths", "[spec]") {
  auto spec =
      from_file("command: [torchrun-like, x]\nlog_dir: /abs/logs\nenvironment:\n  python: python3.11\n",
                "configs/job.yaml", {{"summary_file", "s.json", "--summary"}});
  air::anchor_spec_paths(spec);
  CHECK(spec.command.value.front() == "torchrun-like"); // looked up in PATH
  CHECK(spec.log_dir.value == "/abs/logs");
  CHECK(spec.summary_file.value == "s.json"); // a flag: relative to the working directory
  CHECK(spec.python.value == "python3.11");

  auto piped = from_file("command: [train.py]\nlog_dir: logs\n", std::string(air::k_stdin_spec_name));
  air::anchor_spec_paths(piped);
  CHECK(piped.command.value.front() == "train.py");
  CHECK(piped.log_dir.value == "logs");
  CHECK(piped.spec_path == "<stdin>");
}

TEST_CASE("rank filters naming ranks the run lacks are warned about", "[spec]") {
  auto spec = from_file("command: [x]\n", "job.yaml", {{"console_ranks", "5", "--ranks"}});
  auto lines = air::ignored_settings_warnings(spec, 2, 2);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "air-run: warning: --ranks: rank 5 is not in this run (ranks 0-1); no rank's output is shown");

  spec = from_file("command: [x]\nconsole_ranks: 0,7-8\nlocal_ranks_filter: [9]\n", "job.yaml");
  lines = air::ignored_settings_warnings(spec, 4, 1);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] ==
        "air-run: warning: job.yaml:2:1: console_ranks: ranks 7-8 are not in this run (ranks 0-3)");
  CHECK(lines[1] == "air-run: warning: job.yaml:3:1: local_ranks_filter: local rank 9 is not on this node "
                    "(local ranks 0); no rank's output is shown");

  spec = from_file("command: [x]\nconsole_ranks: 0-1\n", "job.yaml");
  CHECK(air::ignored_settings_warnings(spec, 2, 2).empty());
}

TEST_CASE("env entries for variables air-run sets are warned about", "[spec]") {
  auto spec = from_file("command: [x]\nenv:\n  RANK: '7'\n  MY_VAR: ok\n", "job.yaml");
  const auto lines = air::ignored_settings_warnings(spec, 2, 2);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] ==
        "air-run: warning: job.yaml:2:1: env: RANK=7 is ignored: air-run sets RANK for each rank itself");
}

// The list the warning uses must be what make_plan overrides: each
// variable set in `env` to a marker reaches no rank with that marker.
TEST_CASE("every launcher variable is one make_plan overrides", "[spec]") {
  std::string yaml = "command: [train.py]\nenv:\n";
  for (const auto name : air::launcher_variables()) yaml += "  " + std::string(name) + ": marker\n";
  const auto spec = from_file(yaml, "job.yaml");
  air::Selection selection;
  selection.cpu = true;
  selection.ranks = 2;
  selection.accelerator_type = "CPU";
  air::PlanContext ctx;
  ctx.run_id = "r1";
  ctx.run_dir = "/tmp/air-run-r1";
  ctx.master_port = 29500;
  auto plan = air::make_plan(spec, selection, {}, ctx);
  REQUIRE(plan.ok());
  for (const auto& rank : plan->ranks) {
    for (const auto name : air::launcher_variables()) {
      INFO(name);
      const std::string* value = rank.env.get(std::string(name));
      REQUIRE(value != nullptr);
      CHECK(*value != "marker");
    }
  }
}

TEST_CASE("an AIR_RUN_* variable air-run does not read gets a did-you-mean warning", "[spec]") {
  air::SpecInputs in;
  in.command = {"x"};
  in.environment = {
      {"AIR_RUN_TIMOUT", "5m"}, {"AIR_RUN_ID", "r1"}, {"AIR_RUN_BINARY", "/x"}, {"AIR_RUN_QWERTYUIOP", "1"}};
  auto resolved = air::resolve_spec(in);
  REQUIRE(resolved.ok());
  REQUIRE(resolved->warnings.size() == 2);
  CHECK(resolved->warnings[1] ==
        "air-run: warning: environment variable AIR_RUN_TIMOUT is not one air-run reads (did you mean "
        "AIR_RUN_TIMEOUT?); it is ignored");
  CHECK(resolved->warnings[0] ==
        "air-run: warning: environment variable AIR_RUN_QWERTYUIOP is not one air-run reads; "
        "it is ignored");
}
