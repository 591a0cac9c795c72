// Where tracking goes (core/mlflow/settings.hpp), the mlflow.* spec keys, and the retry rules.
#include "core/mlflow/retry.hpp"
#include "core/mlflow/settings.hpp"
#include "core/spec/spec.hpp"
#include "tests/unit/catch.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace {

using Flags = std::vector<std::tuple<std::string, std::string, std::string>>;

air::Expected<air::ResolvedSpec> resolve(std::string yaml, air::Environment env = {}, Flags flags = {}) {
  air::SpecInputs in;
  if (!yaml.empty()) in.file_text = std::move(yaml);
  in.file_path = "job.yaml";
  in.environment = std::move(env);
  in.flags = std::move(flags);
  in.command = {"train.py", "--lr", "1"};
  return air::resolve_spec(in);
}

air::LaunchSpec spec_of(std::string yaml, air::Environment env = {}, Flags flags = {}) {
  auto r = resolve(std::move(yaml), env, std::move(flags));
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  air::mlflow::apply_standard_variables(r->spec, env);
  return r->spec;
}

air::mlflow::TrackingConfig config_of(const air::LaunchSpec& spec, const air::Environment& env) {
  auto c = air::mlflow::resolve_tracking(spec, env);
  INFO((c ? std::string() : c.error().message));
  REQUIRE(c.ok());
  REQUIRE(c->has_value());
  return **c;
}

} // namespace

TEST_CASE("mlflow keys: YAML group, variables, flags and origins", "[mlflow][spec]") {
  const auto s = spec_of("mlflow:\n  tracking_uri: http://srv:5000\n  experiment: exp\n  run_name: r\n"
                         "  tags:\n    team: vision\n    mlflow.note.content: a note\n  required: true\n"
                         "  timeout: 1m\n");
  CHECK(s.mlflow_tracking_uri.value == "http://srv:5000");
  CHECK(s.mlflow_tracking_uri.origin.where == "job.yaml:2:3");
  CHECK(s.mlflow_experiment.value == "exp");
  CHECK(s.mlflow_run_name.value == "r");
  CHECK(s.mlflow_tags.value ==
        std::map<std::string, std::string>{{"mlflow.note.content", "a note"}, {"team", "vision"}});
  CHECK(s.mlflow_required.value);
  CHECK(s.mlflow_timeout.value == air::Millis(60'000));

  // tags merge per tag: file, then comma-separated variable, then repeated flags
  const auto merged =
      spec_of("mlflow:\n  tags:\n    a: file\n    b: file\n", {{"AIR_RUN_MLFLOW_TAGS", "b=env,c=env"}},
              {{"mlflow.tags", "c=flag", "--mlflow-tag"}, {"mlflow.tags", "d=flag", "--mlflow-tag"}});
  CHECK(merged.mlflow_tags.value ==
        std::map<std::string, std::string>{{"a", "file"}, {"b", "env"}, {"c", "flag"}, {"d", "flag"}});
  CHECK(merged.mlflow_tags.origin.describe() == "flag --mlflow-tag");
}

TEST_CASE("mlflow keys: bad values name their place", "[mlflow][spec]") {
  auto r = resolve("mlflow: 3\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "job.yaml:1:9: mlflow: expected a mapping, got '3'");
  r = resolve("mlflow:\n  tracking_url: x\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message ==
        "job.yaml:2:3: unknown key 'mlflow.tracking_url' (did you mean 'mlflow.tracking_uri'?)");
  r = resolve("mlflow:\n  tags:\n    'a*b': 1\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "job.yaml:3:5: mlflow.tags: invalid tag name 'a*b'");
  r = resolve("", {{"AIR_RUN_MLFLOW_TAGS", "ok=1,broken"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "environment variable AIR_RUN_MLFLOW_TAGS: expected KEY=VALUE, got 'broken'");
  r = resolve("mlflow:\n  required: maybe\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("mlflow.required: expected true or false") != std::string::npos);
  // env keeps its stricter names
  r = resolve("env:\n  mlflow.x: 1\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("invalid variable name") != std::string::npos);
}

TEST_CASE("mlflow keys: MLflow's own variables are defaults, below every air-run source", "[mlflow][spec]") {
  const air::Environment env = {{"MLFLOW_TRACKING_URI", "http://std:5000"},
                                {"MLFLOW_EXPERIMENT_NAME", "std-exp"}};
  const auto from_std = spec_of("", env);
  CHECK(from_std.mlflow_tracking_uri.value == "http://std:5000");
  CHECK(from_std.mlflow_tracking_uri.origin.describe() == "env MLFLOW_TRACKING_URI");
  CHECK(from_std.mlflow_experiment.value == "std-exp");
  const auto from_file = spec_of("mlflow:\n  tracking_uri: http://file:1\n", env);
  CHECK(from_file.mlflow_tracking_uri.value == "http://file:1");
  CHECK(from_file.mlflow_experiment.value == "std-exp");
  const auto none = spec_of("", {});
  CHECK(none.mlflow_tracking_uri.value.empty());
  auto c = air::mlflow::resolve_tracking(none, {});
  REQUIRE(c.ok());
  CHECK_FALSE(c->has_value()); // no URI: no tracking at all
}

TEST_CASE("mlflow settings: http URIs, credentials and the link", "[mlflow]") {
  const air::Environment env = {
      {"MLFLOW_TRACKING_TOKEN", "tok"}, {"MLFLOW_RUN_ID", "parent1"}, {"MLFLOW_EXPERIMENT_ID", "7"}};
  const auto c = config_of(spec_of("mlflow:\n  tracking_uri: https://me:p%40ss@srv:8443/mlflow/\n"), env);
  CHECK(c.kind == air::mlflow::StoreKind::rest);
  CHECK(c.api_base == "https://srv:8443/mlflow");
  CHECK(c.display_uri == "https://srv:8443/mlflow/");
  CHECK(c.basic_user == "me");
  CHECK(c.basic_password == "p@ss");
  CHECK(c.bearer_token == "tok");
  CHECK(c.parent_run_id == "parent1");
  CHECK(c.experiment_id == "7"); // no name given: MLFLOW_EXPERIMENT_ID
  CHECK(c.run_name == "train.py");
  CHECK(air::mlflow::run_link(c, "7", "abc") == "https://srv:8443/mlflow/#/experiments/7/runs/abc");
  CHECK(air::without_userinfo("https://me:p%40ss@srv:8443/x@y") == "https://srv:8443/x@y");
  CHECK(air::without_userinfo("file:/tmp/a@b") == "file:/tmp/a@b");

  auto bad = air::mlflow::resolve_tracking(spec_of("mlflow:\n  tracking_uri: http://:5000\n"), {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "mlflow.tracking_uri http://:5000: no host in the URI");
}

TEST_CASE("mlflow settings: Databricks from variables or a profile", "[mlflow]") {
  const auto spec = spec_of("mlflow:\n  tracking_uri: databricks\n  experiment: /Users/me/exp\n");
  auto c =
      config_of(spec, {{"DATABRICKS_HOST", "adb-1.azuredatabricks.net/"}, {"DATABRICKS_TOKEN", "dapi1"}});
  CHECK(c.kind == air::mlflow::StoreKind::databricks);
  CHECK(c.api_base == "https://adb-1.azuredatabricks.net");
  CHECK(c.bearer_token == "dapi1");
  CHECK(air::mlflow::run_link(c, "5", "r") == "https://adb-1.azuredatabricks.net/ml/experiments/5/runs/r");

  const auto dir = std::filesystem::temp_directory_path() / ("air-dbcfg-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "cfg")
      << "[DEFAULT]\nhost = https://default\ntoken = t0\n\n[team]\nhost = https://team.example\n"
         "token = t1\n";
  const auto profile_spec = spec_of("mlflow:\n  tracking_uri: databricks://team\n  experiment: /x\n");
  c = config_of(profile_spec, {{"DATABRICKS_CONFIG_FILE", (dir / "cfg").string()}});
  CHECK(c.api_base == "https://team.example");
  CHECK(c.bearer_token == "t1");
  std::filesystem::remove_all(dir);

  auto missing = air::mlflow::resolve_tracking(spec, {{"HOME", "/nonexistent"}});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("set DATABRICKS_HOST and DATABRICKS_TOKEN") != std::string::npos);
  auto no_experiment = air::mlflow::resolve_tracking(spec_of("mlflow:\n  tracking_uri: databricks\n"),
                                                     {{"DATABRICKS_HOST", "h"}, {"DATABRICKS_TOKEN", "t"}});
  REQUIRE_FALSE(no_experiment.ok());
  CHECK(no_experiment.error().message.find("Databricks needs an experiment") != std::string::npos);
}

TEST_CASE("mlflow settings: other URIs go through the mlflow package", "[mlflow]") {
  using air::mlflow::StoreKind;
  CHECK(air::mlflow::store_kind("file:./mlruns") == StoreKind::python);
  CHECK(air::mlflow::store_kind("sqlite:///mlflow.db") == StoreKind::python);
  CHECK(air::mlflow::store_kind("/abs/mlruns") == StoreKind::python);
  CHECK(air::mlflow::store_kind("HTTP://srv") == StoreKind::rest);
  CHECK(air::mlflow::describe_store("file:./mlruns", StoreKind::python) == "file store");
  CHECK(air::mlflow::describe_store("mlruns", StoreKind::python) == "file store");
  CHECK(air::mlflow::describe_store("sqlite:///m.db", StoreKind::python) == "SQLite store");
  CHECK(air::mlflow::describe_store("postgresql://db/x", StoreKind::python) == "postgresql store");
  const auto c = config_of(spec_of("mlflow:\n  tracking_uri: file:./mlruns\n", {}), {});
  CHECK(air::mlflow::run_link(c, "1", "r").empty()); // no web page of its own
}

TEST_CASE("mlflow settings: default run names", "[mlflow]") {
  air::LaunchSpec s;
  s.command.value = {"scripts/train.py", "--x"};
  CHECK(air::mlflow::default_run_name(s) == "train.py");
  s.module.value = true;
  s.command.value = {"pkg.train"};
  CHECK(air::mlflow::default_run_name(s) == "pkg.train");
}

TEST_CASE("mlflow retry: what is retried and how long the waits are", "[mlflow]") {
  using air::mlflow::Verdict;
  CHECK(air::mlflow::judge_attempt(0) == Verdict::retry); // no connection, timeout
  CHECK(air::mlflow::judge_attempt(503) == Verdict::retry);
  CHECK(air::mlflow::judge_attempt(500) == Verdict::retry);
  CHECK(air::mlflow::judge_attempt(429) == Verdict::retry);
  CHECK(air::mlflow::judge_attempt(200) == Verdict::done);
  CHECK(air::mlflow::judge_attempt(400) == Verdict::done);
  CHECK(air::mlflow::judge_attempt(401) == Verdict::done);
  CHECK(air::mlflow::judge_attempt(404) == Verdict::done);
  CHECK(air::mlflow::backoff_delay(0).count() == 250);
  CHECK(air::mlflow::backoff_delay(1).count() == 500);
  CHECK(air::mlflow::backoff_delay(3).count() == 2000);
  CHECK(air::mlflow::backoff_delay(50).count() == 2000);
}
