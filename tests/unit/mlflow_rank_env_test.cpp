// What the ranks are handed (core/mlflow/tracker.hpp add_rank_environment):
// a tracking server's URI without its credentials, which go as MLflow's own
// variables, and nothing at all when there is no run to log into; Python
// ranks started while the run is being created get the file the shim waits for.
#include "core/mlflow/settings.hpp"
#include "core/mlflow/tracker.hpp"
#include "core/os/host.hpp"
#include "core/run/plan.hpp"
#include "core/spec/spec.hpp"
#include "tests/unit/catch.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace {

std::unique_ptr<air::mlflow::Tracker> tracker_for(const std::string& uri, const air::Environment& env) {
  air::SpecInputs in;
  in.environment = env;
  in.flags = {{"mlflow.tracking_uri", uri, "--mlflow-tracking-uri"}};
  in.command = {"train.py"};
  auto resolved = air::resolve_spec(in);
  INFO((resolved ? std::string() : resolved.error().message));
  REQUIRE(resolved.ok());
  auto tracker = air::mlflow::Tracker::create(resolved->spec, env);
  REQUIRE(tracker.ok());
  REQUIRE(*tracker != nullptr);
  return std::move(*tracker);
}

air::LaunchPlan plan_with(const air::Environment& env) {
  air::LaunchPlan plan;
  air::RankPlan rank;
  rank.env = env;
  plan.ranks.push_back(rank);
  return plan;
}

} // namespace

TEST_CASE("mlflow ranks: a password in the URI goes as MLflow's variables, decoded", "[mlflow]") {
  const air::Environment env = {{"PATH", "/bin"}};
  auto tracker = tracker_for("http://me:p%40ss%3Aword@mlflow.internal:5000/prefix", env);
  tracker->adopt("3", "0123456789abcdef0123456789abcdef"); // a run, without a server
  air::LaunchPlan plan = plan_with(env);
  tracker->add_rank_environment(plan);
  const auto& e = plan.ranks[0].env;
  CHECK(e.at("MLFLOW_TRACKING_URI") == "http://mlflow.internal:5000/prefix");
  CHECK(e.at("MLFLOW_TRACKING_USERNAME") == "me");
  CHECK(e.at("MLFLOW_TRACKING_PASSWORD") == "p@ss:word");
  CHECK(e.at("MLFLOW_RUN_ID") == "0123456789abcdef0123456789abcdef");
  CHECK(e.at("MLFLOW_EXPERIMENT_ID") == "3");
}

TEST_CASE("mlflow ranks: without credentials in the URI none are added", "[mlflow]") {
  const air::Environment env = {{"PATH", "/bin"}};
  auto tracker = tracker_for("https://mlflow.internal", env);
  tracker->adopt("3", "abc");
  air::LaunchPlan plan = plan_with(env);
  tracker->add_rank_environment(plan);
  CHECK(plan.ranks[0].env.at("MLFLOW_TRACKING_URI") == "https://mlflow.internal");
  CHECK(plan.ranks[0].env.count("MLFLOW_TRACKING_USERNAME") == 0);
  CHECK(plan.ranks[0].env.count("MLFLOW_TRACKING_PASSWORD") == 0);
}

TEST_CASE("mlflow ranks: no run, no tracking variables, not even the caller's", "[mlflow]") {
  const air::Environment env = {{"PATH", "/bin"},
                                {"MLFLOW_TRACKING_URI", "http://down:5000"},
                                {"MLFLOW_RUN_ID", "0123456789abcdef0123456789abcdef"},
                                {"MLFLOW_EXPERIMENT_ID", "7"}};
  auto tracker = tracker_for("http://down:5000", env);
  tracker->adopt("", ""); // node 0 created none
  air::LaunchPlan plan = plan_with(env);
  tracker->add_rank_environment(plan);
  const auto& e = plan.ranks[0].env;
  CHECK(e.count("MLFLOW_TRACKING_URI") == 0);
  CHECK(e.count("MLFLOW_RUN_ID") == 0);
  CHECK(e.count("MLFLOW_EXPERIMENT_ID") == 0);
  CHECK(e.at("PATH") == "/bin");
}

// Python ranks that start while the run is being created (Tracker::begin):
// the run's file for the shim, and when ranks may wait for it.
namespace {

air::LaunchPlan python_plan(const air::Environment& env, const std::string& run_dir) {
  air::LaunchPlan plan = plan_with(env);
  plan.run_dir = run_dir;
  plan.stack_shim_dir = run_dir + "/pyshim";
  return plan;
}

std::string read_all(const std::string& path) {
  auto text = air::read_text_file(path, "the run's file");
  return text ? *text : "(" + text.error().message + ")";
}

} // namespace

TEST_CASE("mlflow ranks: the run's file lists what to take out, then what to set", "[mlflow]") {
  air::mlflow::RankVariables vars;
  vars.set = {{"MLFLOW_RUN_ID", "abc"}, {"MLFLOW_TRACKING_URI", "http://h:5000"}};
  vars.unset = {"MLFLOW_EXPERIMENT_NAME"};
  using namespace std::string_literals; // the entries end in NUL
  CHECK(air::mlflow::rank_variables_file(vars) ==
        "MLFLOW_EXPERIMENT_NAME\0MLFLOW_RUN_ID=abc\0MLFLOW_TRACKING_URI=http://h:5000\0"s);
  CHECK(air::mlflow::rank_variables_file({}).empty());
}

TEST_CASE("mlflow ranks: no run means the three variables are taken out, nothing set", "[mlflow]") {
  air::mlflow::TrackingConfig config;
  const auto vars = air::mlflow::rank_variables(config, nullptr);
  CHECK(vars.set.empty());
  CHECK(vars.unset ==
        std::vector<std::string>{"MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID"});
}

TEST_CASE("mlflow ranks: only Python ranks started by air-run itself wait for the run", "[mlflow]") {
  const air::Environment env = {{"PATH", "/bin"}};
  air::LaunchPlan plan = python_plan(env, "/tmp/run");
  CHECK(air::mlflow::Tracker::ranks_can_wait(plan));
  plan.preload = {"torch"}; // forked from an interpreter that ran the shim before the run
  CHECK_FALSE(air::mlflow::Tracker::ranks_can_wait(plan));
  CHECK_FALSE(air::mlflow::Tracker::ranks_can_wait(plan_with(env))); // --no-python: no shim
}

TEST_CASE("mlflow ranks: started before the run exists, Python ranks get its file, then no run in it",
          "[mlflow]") {
  char dir_template[] = "/tmp/air-mlflow-test-XXXXXX";
  const char* dir = ::mkdtemp(dir_template);
  REQUIRE(dir != nullptr);
  const std::string run_dir = dir;
  const air::Environment env = {{"PATH", "/bin"},
                                {"TMPDIR", run_dir}, // where the run's file gets a folder of its own
                                {"MLFLOW_RUN_ID", "0123456789abcdef0123456789abcdef"}};
  air::SpecInputs in;
  in.environment = env;
  in.flags = {{"mlflow.tracking_uri", "http://127.0.0.1:1", "--mlflow-tracking-uri"}, // nothing listens
              {"mlflow.timeout", "2s", "--mlflow-timeout"}};
  in.command = {"train.py"};
  auto resolved = air::resolve_spec(in);
  REQUIRE(resolved.ok());
  auto tracker = air::mlflow::Tracker::create(resolved->spec, env);
  REQUIRE(tracker.ok());
  REQUIRE(*tracker != nullptr);
  air::mlflow::LaunchFacts facts;
  (*tracker)->begin(facts, true);
  air::LaunchPlan plan = python_plan(env, run_dir);
  plan.run_id = "r1";
  (*tracker)->add_rank_environment(plan);
  const auto& e = plan.ranks[0].env;
  const std::string run_file = e.at("AIR_RUN_MLFLOW_RUN_FILE");
  CHECK(run_file.rfind(run_dir + "/air-run-r1-mlflow-", 0) == 0);
  CHECK(run_file.substr(run_file.size() - 11) == "/mlflow-run");
  CHECK(e.at("AIR_RUN_MLFLOW_RUN_WAIT") == "7.0"); // mlflow.timeout and 5 s for the last attempt
  CHECK(e.count("MLFLOW_RUN_ID") == 0);            // neither the caller's nor a run's yet
  CHECK(e.count("MLFLOW_TRACKING_URI") == 0);
  CHECK(::access(run_file.c_str(), F_OK) != 0); // not before the creation is over
  REQUIRE((*tracker)->settle().ok());           // not required: an untracked run
  CHECK_FALSE((*tracker)->has_run());
  using namespace std::string_literals;
  CHECK(read_all(run_file) == "MLFLOW_TRACKING_URI\0MLFLOW_RUN_ID\0MLFLOW_EXPERIMENT_ID\0"s);
  (*tracker).reset(); // removes the file's folder
  CHECK(::access(run_file.c_str(), F_OK) != 0);
  CHECK(::rmdir(run_dir.c_str()) == 0); // nothing else left in it
}

TEST_CASE("mlflow ranks: only targets run by the interpreter run the shim that waits for the run",
          "[mlflow]") {
  const auto spec_for = [](std::vector<std::string> command, bool no_python) {
    air::SpecInputs in;
    in.command = std::move(command);
    if (no_python) in.flags = {{"no_python", "true", "--no-python"}};
    auto resolved = air::resolve_spec(in);
    REQUIRE(resolved.ok());
    return resolved->spec;
  };
  CHECK(air::runs_python_target(spec_for({"train.py", "--lr", "1"}, false)));
  CHECK_FALSE(air::runs_python_target(spec_for({"./train.sh"}, false))); // run as is
  CHECK_FALSE(air::runs_python_target(spec_for({"train.py"}, true)));    // --no-python
}
