// The summary's "mlflow" object and settings (core/report/summary.cpp with core/mlflow/run_info.hpp).
#include "core/mlflow/run_info.hpp"
#include "core/report/summary.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

using Json = nlohmann::ordered_json;

TEST_CASE("summary: mlflow is null without tracking, the run's record with it", "[mlflow][summary]") {
  air::test::SampleRun run;
  air::RunReport report = air::test::sample_report(run);
  CHECK(air::summary_json(report)["mlflow"].is_null());

  air::mlflow::RunInfo info;
  info.tracking_uri = "http://srv:5000";
  info.experiment_id = "3";
  info.run_id = "fcf4cfd68e2b407fb77ddfcadf73f27b";
  info.link = "http://srv:5000/#/experiments/3/runs/fcf4cfd68e2b407fb77ddfcadf73f27b";
  info.status = "FAILED";
  info.artifact = "air-run-summary.json";
  report.mlflow = &info;
  CHECK(air::summary_json(report)["mlflow"] == Json::parse(R"j({
    "tracking_uri": "http://srv:5000", "experiment_id": "3", "run_id": "fcf4cfd68e2b407fb77ddfcadf73f27b",
    "parent_run_id": null, "link": "http://srv:5000/#/experiments/3/runs/fcf4cfd68e2b407fb77ddfcadf73f27b",
    "status": "FAILED", "artifact": "air-run-summary.json", "tracking": "ok", "errors": []})j"));

  air::mlflow::RunInfo failed;
  failed.tracking_uri = "http://srv:5000";
  failed.errors = {"run not created: runs/create: no usable answer within 15s (9 attempts): HTTP 503"};
  report.mlflow = &failed;
  const Json m = air::summary_json(report)["mlflow"];
  CHECK(m["tracking"] == "failed");
  CHECK(m["run_id"].is_null());
  CHECK(m["link"].is_null());
  CHECK(m["errors"].size() == 1);
}

TEST_CASE("summary: a tracking URI's credentials never reach the settings", "[mlflow][summary]") {
  air::test::SampleRun run;
  run.spec.mlflow_tracking_uri.value = "https://me:secret@srv/mlflow";
  run.spec.mlflow_tags.value = {{"team", "vision"}};
  const air::RunReport report = air::test::sample_report(run);
  const Json s = air::summary_json(report)["spec"]["settings"];
  CHECK(s["mlflow.tracking_uri"]["value"] == "https://srv/mlflow");
  CHECK(s["mlflow.tags"]["value"] == Json::parse(R"j({"team": "vision"})j"));
  CHECK(s["mlflow.timeout"]["value"] == 15.0);
  CHECK(air::summary_text(report).find("secret") == std::string::npos);
}
