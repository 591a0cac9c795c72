// MLflow REST bodies and answers (core/mlflow/rest.hpp), checked against the
// recorded exchanges in tests/data/mlflow: what air-run sends has the fields
// the recorded servers took, and it reads what they answered.
#include "core/mlflow/rest.hpp"
#include "tests/unit/catch.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

using air::mlflow::KeyValue;
using air::mlflow::MetricPoint;
// Not `Json`: a unity build batches this file with tests whose `Json` is ordered_json.
using RestJson = nlohmann::json;

namespace {

RestJson recordings(const std::string& version) {
  // Appended, not `std::string(...) + "..."`: g++ 14 warns -Warray-bounds on
  // that operator+ at -O2 (a false positive inside libstdc++).
  std::string path = AIR_TEST_DATA_DIR "/data/mlflow/mlflow-";
  path.append(version).append("-rest.json");
  std::ifstream in(path);
  REQUIRE(in.good());
  return RestJson::parse(in);
}

/// The first recorded exchange of `path` with `status`.
RestJson exchange(const RestJson& rec, const std::string& path, int status) {
  for (const auto& e : rec["exchanges"]) {
    if (e["path"] == path && e["status"] == status) return e;
  }
  FAIL("no recorded " << path << " " << status);
  return {};
}

std::set<std::string> keys(const RestJson& object) {
  std::set<std::string> out;
  for (auto it = object.begin(); it != object.end(); ++it) out.insert(it.key());
  return out;
}

} // namespace

TEST_CASE("mlflow rest: request bodies have the recorded fields and types", "[mlflow]") {
  const RestJson rec = recordings("2.17.2");

  const RestJson create_exp =
      RestJson::parse(air::mlflow::create_experiment_body("e", {{"air.created_by", "air-run"}}));
  CHECK(keys(create_exp) == keys(exchange(rec, "experiments/create", 200)["request"]));

  const RestJson recorded_run = exchange(rec, "runs/create", 200)["request"];
  const RestJson run =
      RestJson::parse(air::mlflow::create_run_body("3", "train.py", 1796070581526, {{"k", "v"}}));
  CHECK(keys(run) == keys(recorded_run));
  CHECK(run["experiment_id"].is_string());
  CHECK(run["start_time"].is_number_integer());
  CHECK(run["tags"] == RestJson::array({{{"key", "k"}, {"value", "v"}}}));
  // no name, no tags: those fields are left out, as the recorded nameless run did
  CHECK(keys(RestJson::parse(air::mlflow::create_run_body("3", "", 5, {}))) ==
        std::set<std::string>{"experiment_id", "start_time"});

  const RestJson recorded_update = exchange(rec, "runs/update", 200)["request"];
  const RestJson update = RestJson::parse(air::mlflow::update_run_body("r", "KILLED", 7));
  CHECK(keys(update) == keys(recorded_update));
  CHECK(update["end_time"] == 7);

  const RestJson recorded_batch = exchange(rec, "runs/log-batch", 200)["request"];
  const auto bodies =
      air::mlflow::log_batch_bodies("r", {{"p", "1"}}, {{"loss", 0.5, 1796070581526, 2}}, {{"t", "x"}});
  REQUIRE(bodies.size() == 1);
  const RestJson batch = RestJson::parse(bodies[0]);
  CHECK(keys(batch) == keys(recorded_batch));
  CHECK(keys(batch["metrics"][0]) == keys(recorded_batch["metrics"][0]));
  CHECK(batch["metrics"][0]["value"] == 0.5);
  CHECK(batch["metrics"][0]["step"] == 2);
}

TEST_CASE("mlflow rest: log-batch respects MLflow's per-request limits", "[mlflow]") {
  std::vector<KeyValue> params(150, KeyValue{"p", "v"});
  for (std::size_t i = 0; i < params.size(); ++i) params[i].key = "p" + std::to_string(i);
  std::vector<MetricPoint> metrics(1500, MetricPoint{"m", 1.0, 1, 0});
  std::vector<KeyValue> tags(20, KeyValue{"t", "v"});
  const auto bodies = air::mlflow::log_batch_bodies("r", params, metrics, tags);
  std::size_t np = 0, nm = 0, nt = 0;
  for (const auto& text : bodies) {
    const RestJson b = RestJson::parse(text);
    const std::size_t p = b.value("params", RestJson::array()).size();
    const std::size_t m = b.value("metrics", RestJson::array()).size();
    const std::size_t t = b.value("tags", RestJson::array()).size();
    CHECK(p <= 100);
    CHECK(m <= 1000);
    CHECK(t <= 100);
    CHECK(p + m + t <= 1000);
    CHECK(p + m + t > 0);
    np += p, nm += m, nt += t;
  }
  CHECK(np == 150);
  CHECK(nm == 1500);
  CHECK(nt == 20);
  // params come first: the first body is full of them
  CHECK(RestJson::parse(bodies.front())["params"].size() == 100);
  CHECK(air::mlflow::log_batch_bodies("r", {}, {}, {}).empty());
}

TEST_CASE("mlflow rest: long values are cut on a character boundary", "[mlflow]") {
  CHECK(air::mlflow::truncate_value("short", 10) == "short");
  CHECK(air::mlflow::truncate_value("abcdefghijkl", 10) == "abcdefg...");
  // "é" is two bytes; a cut inside it backs up to before it
  const std::string s = "abcdef\xc3\xa9zzzz";
  const std::string cut = air::mlflow::truncate_value(s, 10);
  CHECK(cut == "abcdef...");
  const auto bodies = air::mlflow::log_batch_bodies("r", {{"args", std::string(7000, 'x')}}, {},
                                                    {{"t", std::string(6000, 'y')}});
  const RestJson b = RestJson::parse(bodies.at(0));
  CHECK(b["params"][0]["value"].get<std::string>().size() == air::mlflow::k_max_param_value);
  CHECK(b["tags"][0]["value"].get<std::string>().size() == air::mlflow::k_max_tag_value);
}

TEST_CASE("mlflow rest: recorded answers are read", "[mlflow]") {
  for (const std::string version : {"2.17.2", "3.6.1.dev0"}) {
    INFO(version);
    const RestJson rec = recordings(version);
    const auto created =
        air::mlflow::parse_experiment_created(exchange(rec, "experiments/create", 200)["response"].dump());
    REQUIRE(created.ok());
    CHECK(*created == "3");
    const auto found = air::mlflow::parse_experiment_lookup(
        exchange(rec, "experiments/get-by-name", 200)["response"].dump());
    REQUIRE(found.ok());
    CHECK(*found == "3");
    const RestJson run_answer = exchange(rec, "runs/create", 200)["response"];
    const auto run = air::mlflow::parse_run(run_answer.dump());
    REQUIRE(run.ok());
    CHECK(run->run_id == run_answer["run"]["info"]["run_id"].get<std::string>());
    CHECK(run->experiment_id == "3");
    CHECK(run->artifact_uri == run_answer["run"]["info"]["artifact_uri"].get<std::string>());
    const auto got = air::mlflow::parse_run(exchange(rec, "runs/get", 200)["response"].dump());
    REQUIRE(got.ok());

    const auto missing =
        air::mlflow::parse_api_error(exchange(rec, "experiments/get-by-name", 404)["response"].dump());
    REQUIRE(missing);
    CHECK(missing->code == "RESOURCE_DOES_NOT_EXIST");
    const auto dup =
        air::mlflow::parse_api_error(exchange(rec, "experiments/create", 400)["response"].dump());
    REQUIRE(dup);
    CHECK(dup->code == "RESOURCE_ALREADY_EXISTS");
  }
  CHECK_FALSE(air::mlflow::parse_api_error("{}"));
  CHECK_FALSE(air::mlflow::parse_api_error("<html>502 Bad Gateway</html>"));
  const auto bad = air::mlflow::parse_run("{\"run\": {}}");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("no run.info") != std::string::npos);
}

TEST_CASE("mlflow rest: URLs", "[mlflow]") {
  CHECK(air::mlflow::api_url("http://h:5000/", "runs/create") == "http://h:5000/api/2.0/mlflow/runs/create");
  CHECK(air::mlflow::api_url("https://h/prefix", "runs/get") == "https://h/prefix/api/2.0/mlflow/runs/get");
  CHECK(air::mlflow::query_escape("/Users/a b@x.com/exp&1") == "%2FUsers%2Fa%20b%40x.com%2Fexp%261");
  CHECK(air::mlflow::proxied_artifact_path("mlflow-artifacts:/3/abc/artifacts") == "3/abc/artifacts");
  CHECK(air::mlflow::proxied_artifact_path("mlflow-artifacts://srv:5000/3/abc/artifacts/") ==
        "3/abc/artifacts");
  CHECK_FALSE(air::mlflow::proxied_artifact_path("dbfs:/databricks/mlflow-tracking/3/abc/artifacts"));
  CHECK_FALSE(air::mlflow::proxied_artifact_path("/srv/mlruns/3/abc/artifacts"));
  CHECK(air::mlflow::artifact_url("http://h:1", "3/abc/artifacts", "s.json") ==
        "http://h:1/api/2.0/mlflow-artifacts/artifacts/3/abc/artifacts/s.json");
}

TEST_CASE("mlflow rest: the search for a launch's token has the recorded search's shape", "[mlflow]") {
  for (const std::string version : {"2.17.2", "3.6.1.dev0"}) {
    INFO(version);
    const RestJson rec = recordings(version);
    const RestJson recorded = exchange(rec, "runs/search", 200);
    const RestJson body =
        RestJson::parse(air::mlflow::search_runs_by_tag_body("3", "air.launch_token", "0af3"));
    CHECK(keys(body) == keys(recorded["request"]));
    CHECK(body["experiment_ids"] == RestJson::array({"3"}));
    // the recorded filter's form, with another dotted tag
    CHECK(body["filter"] == "tags.air.launch_token = '0af3'");
    const std::string recorded_filter = recorded["request"]["filter"];
    CHECK(recorded_filter.rfind("tags.mlflow.parentRunId = '", 0) == 0);

    const auto runs = air::mlflow::parse_searched_runs(recorded["response"].dump());
    REQUIRE(runs.ok());
    REQUIRE(runs->size() == recorded["response"]["runs"].size());
    CHECK(runs->front().run_id == recorded["response"]["runs"][0]["info"]["run_id"].get<std::string>());
    CHECK(runs->front().experiment_id == "3");
    // nothing found: MLflow answers {}
    const auto none = air::mlflow::parse_searched_runs("{}");
    REQUIRE(none.ok());
    CHECK(none->empty());
    CHECK_FALSE(air::mlflow::parse_searched_runs("{\"runs\": 3}").ok());

    // a run's status and lifecycle stage: whether a parent run can be nested under
    const auto got = air::mlflow::parse_run(exchange(rec, "runs/get", 200)["response"].dump());
    REQUIRE(got.ok());
    CHECK(got->status == "FINISHED");
    CHECK(got->lifecycle_stage == "active");
  }
}
