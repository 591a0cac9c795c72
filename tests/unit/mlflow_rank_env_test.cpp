// What the ranks are handed (core/mlflow/tracker.hpp add_rank_environment):
// a tracking server's URI without its credentials, which go as MLflow's own
// variables, and nothing at all when there is no run to log into.
#include "core/mlflow/settings.hpp"
#include "core/mlflow/tracker.hpp"
#include "core/spec/spec.hpp"
#include "tests/unit/catch.hpp"

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
