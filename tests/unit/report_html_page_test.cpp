#include "core/report/html_page.hpp"
#include "tests/unit/catch.hpp"

#include <fmt/format.h>

#include <string>

using Json = nlohmann::ordered_json;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

/// A summary as air-run writes it, with the fields the page reads: `ranks`
/// ranks over `seconds`, each with `points` step readings and `quiet` quiet
/// stretches; `gpus` GPUs with as many readings.
Json synthetic(int ranks, double seconds, int points, int quiet, int gpus) {
  Json doc;
  doc["schema_version"] = 1;
  doc["air_run_version"] = "0.1.0";
  doc["run_id"] = "20261207-010203-abcdef";
  doc["host"] = "node0";
  doc["started_at"] = "2026-12-07T01:02:03.000Z";
  doc["duration_s"] = seconds;
  doc["spec"] = {{"settings", {{"command", {{"value", {"train.py", "--lr", "1e-3"}}}}}}};
  doc["launch"] = {{"world_size", ranks}, {"node_rank", 0}, {"num_nodes", 1}, {"node_name", "node0"}};
  Json attempts = Json::array();
  attempts.push_back({{"attempt", 0},
                      {"status", "failed"},
                      {"reason", "rank 1 exited with exit code 1"},
                      {"error", "ValueError: bad batch"},
                      {"started_at", "2026-12-07T01:02:03.000Z"},
                      {"ended_at", "2026-12-07T01:02:13.000Z"}});
  attempts.push_back({{"attempt", 1},
                      {"status", "hung"},
                      {"reason", "no progress for 5m"},
                      {"started_at", "2026-12-07T01:02:14.000Z"},
                      {"ended_at", "2026-12-07T01:03:03.000Z"}});
  doc["outcome"] = {{"status", "hung"},
                    {"exit_code", 1},
                    {"root_cause_rank", 1},
                    {"reason", "no progress <b>for</b> 5m"},
                    {"restarts", 1},
                    {"attempts", attempts},
                    {"hang",
                     {{"quiet_s", 300},
                      {"at", "2026-12-07T01:03:00.000Z"},
                      {"laggards", {1}},
                      {"diagnosis", "rank 1 is behind: ranks 0, 2 wait in all_reduce #7"},
                      {"ranks",
                       {{{"rank", 0},
                         {"node", 0},
                         {"steps", 7},
                         {"place", "train.py:40"},
                         {"collective", "all_reduce"},
                         {"collective_seq", 7},
                         {"waiting_s", 300}},
                        {{"rank", 1}, {"node", 0}, {"steps", 6}, {"place", "train.py:31"}}}}}},
                    {"preemption", nullptr}};
  doc["stragglers"] =
      Json::array({{{"rank", 2}, {"ms_per_step", 80.0}, {"others_ms_per_step", 40.0}, {"gpu", nullptr}}});
  doc["ranks"] = Json::array();
  Json lanes = Json::array();
  for (int r = 0; r < ranks; ++r) {
    const bool failed = r == 1;
    doc["ranks"].push_back(
        {{"rank", r},
         {"pid", 100 + r},
         {"exit", {{"code", failed ? 1 : 0}, {"description", failed ? "exit code 1" : "exit code 0"}}},
         {"stopped_by_air_run", false},
         {"duration_s", seconds},
         {"steps", points},
         {"error", failed ? Json({{"type", "ValueError"},
                                  {"message", "bad batch"},
                                  {"source", "error_file"},
                                  {"traceback", "Traceback (most recent call last):\n  File "
                                                "\"/w/train.py\", line 27, in <module>\nValueError: "
                                                "bad batch\n"}})
                          : Json(nullptr)}});
    Json steps = Json::array();
    for (int i = 0; i < points; ++i) steps.push_back({seconds * i / points, static_cast<double>(i * 10)});
    Json q = Json::array();
    for (int i = 0; i < quiet; ++i) q.push_back({seconds * i / quiet, seconds * i / quiet + 6});
    lanes.push_back({{"rank", r},
                     {"node_rank", 0},
                     {"spans",
                      {{{"attempt", 0}, {"started_s", 0.1}, {"first_step_s", 1.0}, {"ended_s", 10.0}},
                       {{"attempt", 1}, {"started_s", 11.0}, {"first_step_s", 12.0}, {"ended_s", seconds}}}},
                     {"steps_width", 1},
                     {"steps", steps},
                     {"quiet", q}});
  }
  Json gpu_list = Json::array();
  for (int g = 0; g < gpus; ++g) {
    Json s = Json::array();
    for (int i = 0; i < points; ++i) s.push_back({seconds * i / points, 50.0 + (i % 50)});
    gpu_list.push_back({{"uuid", fmt::format("GPU-{}", g)},
                        {"utilization_pct", s},
                        {"memory_used_mib", s},
                        {"power_w", s},
                        {"temperature_c", s}});
  }
  doc["timeline"] = {
      {"version", 1},   {"sample_interval_s", 1.0}, {"quiet_threshold_s", 5.0}, {"preempted_at_s", nullptr},
      {"ranks", lanes}, {"gpus", gpu_list}};
  doc["mlflow"] = {{"link", "http://mlflow:5000/#/experiments/1/runs/abc"}};
  return doc;
}

} // namespace

TEST_CASE("the page has a lane per rank, a band per attempt and the markers the summary has", "[html]") {
  const std::string page = air::html_page({synthetic(4, 60, 20, 2, 2)});
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count(page, "<g class=\"lane") == 4);
  CHECK(count(page, "<g class=\"attempt ") == 2);
  CHECK(count(page, "data-kind=\"first-step\"") == 8); // two attempts of four ranks
  CHECK(count(page, "data-kind=\"quiet\"") == 8);
  CHECK(count(page, "data-kind=\"hang\"") == 1);
  CHECK(count(page, "data-kind=\"straggler\"") == 1);
  CHECK(count(page, "class=\"gpu-line\"") == 8); // two GPUs in four charts
  // The failure names the exception and the user's line.
  CHECK(page.find("ValueError: bad batch (train.py:27)") != std::string::npos);
  CHECK(page.find("rank 1 is behind: ranks 0, 2 wait in all_reduce #7") != std::string::npos);
  // Text from the run is escaped, never markup.
  CHECK(page.find("no progress &lt;b&gt;for&lt;/b&gt; 5m") != std::string::npos);
  CHECK(page.find("<b>for") == std::string::npos);
}

TEST_CASE("the page loads nothing: no script, no external source, the one link the MLflow run's", "[html]") {
  const std::string page = air::html_page({synthetic(4, 60, 20, 2, 2)});
  CHECK(count(page, "<script") == 0);
  CHECK(count(page, "src=") == 0);
  CHECK(count(page, "url(http") == 0);
  CHECK(count(page, "@import") == 0);
  CHECK(count(page, "href=") == 1);
  CHECK(count(page, "http") == 2); // the MLflow link, as text and as its href
}

TEST_CASE("8 ranks over 24 hours draw a page under 1 MB", "[html]") {
  const std::string page = air::html_page({synthetic(8, 24 * 3600, 257, 32, 8)});
  INFO(page.size());
  CHECK(page.size() < 1'000'000);
}

TEST_CASE("at 1,024 ranks alike ranks share lanes and the outliers keep their own", "[html]") {
  const std::string page = air::html_page({synthetic(1024, 600, 64, 1, 0)});
  const std::size_t lanes = count(page, "<g class=\"lane");
  CHECK(lanes <= 8);
  CHECK(lanes >= 3);
  CHECK(page.find("rank 1 (root cause)") != std::string::npos);
  CHECK(page.find("rank 2 (straggler)") != std::string::npos);
  CHECK(page.find("data-count=\"1022\"") != std::string::npos);
  CHECK(page.size() < 1'000'000);
}

TEST_CASE("several nodes' summaries make one page on one time axis", "[html]") {
  Json node0 = synthetic(2, 60, 10, 0, 0);
  Json node1 = synthetic(2, 60, 10, 0, 0);
  node1["launch"]["node_rank"] = 1;
  node1["host"] = "node1";
  node1["launch"]["node_name"] = "node1";
  node1["started_at"] = "2026-12-07T01:02:13.000Z"; // ten seconds later
  for (auto& r : node1["ranks"]) r["rank"] = r["rank"].get<int>() + 2;
  for (auto& r : node1["timeline"]["ranks"]) r["rank"] = r["rank"].get<int>() + 2;
  const std::string page = air::html_page({node1, node0});
  CHECK(count(page, "<g class=\"lane") == 4);
  CHECK(page.find("node0 (0), node1 (1)") != std::string::npos);
  CHECK(page.find("1m10s") != std::string::npos); // the axis covers both
}

TEST_CASE("a summary without a timeline, or no summary, still draws a page", "[html]") {
  Json doc = synthetic(2, 5, 3, 0, 0);
  doc.erase("timeline");
  const std::string page = air::html_page({doc});
  CHECK(count(page, "<g class=\"lane") == 2);
  CHECK(air::html_page({}).find("no summary") != std::string::npos);
  CHECK(air::html_page({Json::parse("[1,2]")}).find("no summary") != std::string::npos);
}

TEST_CASE("UTC times read as seconds since the epoch", "[html]") {
  CHECK(air::parse_utc_seconds("1970-01-01T00:00:00.000Z") == 0);
  CHECK(air::parse_utc_seconds("2026-12-07T01:02:03.500Z") == Approx(1796605323.5));
  CHECK(air::parse_utc_seconds("yesterday") == 0);
}
