// The JSON summary: exact shape for a hand-built run, and its JSON Schema.
#include "core/os/atomic_file.hpp"
#include "core/report/summary.hpp"
#include "core/run/attempts.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <cstdlib>
#include <set>

using Json = nlohmann::ordered_json;

namespace {

std::set<std::string> keys_of(const Json& j) {
  std::set<std::string> out;
  for (const auto& [k, v] : j.items()) out.insert(k);
  return out;
}

std::vector<std::string> ordered_keys(const Json& j) {
  std::vector<std::string> out;
  for (const auto& [k, v] : j.items()) out.push_back(k);
  return out;
}

} // namespace

TEST_CASE("summary document shape", "[summary]") {
  air::test::SampleRun run;
  const air::RunReport report = air::test::sample_report(run);
  const Json doc = air::summary_json(report);

  CHECK(ordered_keys(doc) ==
        std::vector<std::string>{"schema_version", "air_run_version", "run_id", "host", "started_at",
                                 "ended_at", "duration_s", "spec", "hardware", "selection", "launch",
                                 "outcome", "stragglers", "ranks", "mlflow", "python_env", "timeline"});
  CHECK(doc["schema_version"] == 1);
  CHECK(doc["air_run_version"] == AIR_VERSION);
  CHECK(doc["run_id"] == "r1");
  CHECK(doc["host"] == "node-3");
  CHECK(doc["started_at"] == "2026-04-07T10:13:24.123Z");
  CHECK(doc["ended_at"] == "2026-04-07T10:13:36.533Z");
  CHECK(doc["duration_s"] == 12.41);

  SECTION("spec with origins") {
    const Json& spec = doc["spec"];
    CHECK(keys_of(spec) == std::set<std::string>{"path", "settings"});
    CHECK(spec["path"] == "job.yaml");
    const Json& s = spec["settings"];
    CHECK(ordered_keys(s) == std::vector<std::string>{"accelerator_type",
                                                      "num_accelerators",
                                                      "cpu_ranks",
                                                      "timeout",
                                                      "grace_period",
                                                      "hang_timeout",
                                                      "on_hang",
                                                      "environment.python",
                                                      "environment.dependencies",
                                                      "environment.requirements_file",
                                                      "env",
                                                      "command",
                                                      "module",
                                                      "no_python",
                                                      "master_addr",
                                                      "master_port",
                                                      "log_dir",
                                                      "checkpoint_dir",
                                                      "preload",
                                                      "console_ranks",
                                                      "isolate_gpus",
                                                      "run_id",
                                                      "summary_file",
                                                      "json",
                                                      "junit_file",
                                                      "html",
                                                      "tail_lines",
                                                      "mlflow.tracking_uri",
                                                      "mlflow.experiment",
                                                      "mlflow.run_name",
                                                      "mlflow.tags",
                                                      "mlflow.required",
                                                      "mlflow.timeout",
                                                      "live",
                                                      "quiet",
                                                      "stdin",
                                                      "timestamps"});
    for (const auto& [key, entry] : s.items()) {
      INFO(key);
      CHECK(ordered_keys(entry) == std::vector<std::string>{"value", "origin", "where"});
    }
    CHECK(s["timeout"] == Json::parse(R"j({"value": 5400.0, "origin": "file", "where": "job.yaml:3:10"})j"));
    CHECK(s["grace_period"] == Json::parse(R"j({"value": 30.0, "origin": "default", "where": null})j"));
    CHECK(s["num_accelerators"] ==
          Json::parse(R"j({"value": 4, "origin": "env", "where": "AIR_RUN_NUM_ACCELERATORS"})j"));
    CHECK(s["command"]["value"] == Json::parse(R"j(["train.py", "--lr", "1e-3"])j"));
    CHECK(s["command"]["origin"] == "flag");
    CHECK(s["env"]["value"] == Json::parse(R"j({"HF_TOKEN": "<redacted>", "NCCL_DEBUG": "INFO"})j"));
    CHECK(s["environment.python"]["value"] == "python3");
    CHECK(s["master_port"]["value"] == 0);
    CHECK(s["tail_lines"]["value"] == 50);
    CHECK(s["json"]["value"] == false);
  }

  SECTION("hardware and selection") {
    const Json& hw = doc["hardware"];
    CHECK(ordered_keys(hw) ==
          std::vector<std::string>{"source", "reason", "cuda_visible_devices", "gpus", "notes"});
    CHECK(hw["source"] == "AIR_RUN_FAKE_GPUS");
    CHECK(hw["reason"].is_null());
    CHECK(hw["cuda_visible_devices"].is_null());
    REQUIRE(hw["gpus"].size() == 2);
    CHECK(hw["gpus"][1] == Json::parse(R"j({"index": 1, "uuid": "GPU-bbbb", "pci_bus_id": "00000000:2A:00.0",
        "name": "NVIDIA H100 80GB HBM3", "model": "H100", "memory_total_bytes": 85899345920})j"));
    CHECK(doc["selection"] == Json::parse(R"j({"accelerator_type": "GPU_2xH100", "cpu": false, "ranks": 4,
        "gpu_binding": "uuid", "gpus": ["GPU-aaaa", "GPU-bbbb"], "notices": []})j"));
    CHECK(doc["launch"] == Json::parse(R"j({"world_size": 4, "node_rank": 0, "num_nodes": 1,
        "node_name": null, "cluster_source": "single", "master_addr": "127.0.0.1", "master_port": 29500,
        "run_dir": "/tmp/air-run-r1", "timeout_s": 5400.0, "grace_period_s": 30.0, "max_restarts": 0})j"));
  }

  SECTION("outcome") {
    CHECK(doc["outcome"] == Json::parse(R"j({"status": "failed", "exit_code": 3, "root_cause_rank": 1,
        "reason": "rank 1 exited with exit code 3", "refusal": null, "interrupt_signal": null, "interrupt_signal_name": null,
        "console_lines_dropped": 0, "remote_failure": null, "restarts": 0, "attempts": [], "hang": null,
        "preemption": null, "checkpoint": null})j"));
  }

  SECTION("ranks") {
    const Json& ranks = doc["ranks"];
    REQUIRE(ranks.size() == 4);
    for (const Json& r : ranks) {
      CHECK(ordered_keys(r) ==
            std::vector<std::string>{"rank",         "local_rank",  "pid",       "gpu",
                                     "cpu_affinity", "numa_node",   "exit",      "stopped_by_air_run",
                                     "oom_killed",   "spawn_error", "warm",      "fresh_reason",
                                     "end_order",    "duration_s",  "user_s",    "sys_s",
                                     "max_rss_kb",   "result",      "error",     "log",
                                     "log_error",    "killed",      "last_line", "last_output_age_s",
                                     "stack",        "steps"});
    }
    CHECK(ranks[0] == Json::parse(R"j({"rank": 0, "local_rank": 0, "pid": 4242, "gpu": "GPU-aaaa",
        "cpu_affinity": null, "numa_node": null,
        "exit": {"code": null, "signal": 15, "signal_name": "SIGTERM", "core_dumped": false,
                 "description": "signal 15 (SIGTERM)"},
        "stopped_by_air_run": true, "oom_killed": false, "spawn_error": null, "warm": false, "fresh_reason": null, "end_order": 4,
        "duration_s": 12.3, "user_s": 10.1, "sys_s": 0.4, "max_rss_kb": 812344,
        "result": {"state": "ok", "value": {"loss": 0.5, "acc": 0.9}}, "error": null, "log": null,
        "log_error": null, "killed": false, "last_line": "epoch 1 loss 0.5", "last_output_age_s": null,
        "stack": null, "steps": null})j"));
    CHECK(ranks[1]["exit"] == Json::parse(R"j({"code": 3, "signal": null, "signal_name": null,
        "core_dumped": false, "description": "exit code 3"})j"));
    CHECK(ranks[1]["result"] == Json::parse(R"j({"state": "missing"})j"));
    CHECK(ranks[1]["error"] == Json::parse(R"j({"type": "RuntimeError", "message": "boom",
        "traceback": "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nRuntimeError: boom\n",
        "source": "error_file", "timestamp": 1712484803})j"));
    CHECK(ranks[1]["log"] == "/logs/rank1.log");
    CHECK(ranks[2]["exit"]["core_dumped"] == true);
    CHECK(ranks[2]["result"] ==
          Json::parse(R"j({"state": "invalid", "error": "parse error", "excerpt": "{oops"})j"));
    CHECK(ranks[2]["error"] == Json::parse(R"j({"type": null, "message": "signal 11 (SIGSEGV, core dumped)",
        "traceback": "step 7\nFatal Python error: Segmentation fault", "source": "output_tail",
        "timestamp": null})j"));
    CHECK(ranks[3]["result"] == Json::parse(R"j({"state": "ok", "value": 42})j"));
    CHECK(ranks[3]["error"].is_null());
  }
}

TEST_CASE("summary edge cases", "[summary]") {
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::interrupted;
  run.outcome.interrupt_signal = 2;
  run.outcome.root_cause_rank = -1;
  run.outcome.ranks[0].pid = -1;
  run.outcome.ranks[0].status = {};
  run.outcome.ranks[0].end_order = 0;
  run.outcome.ranks[3].tail = {std::string("bad \xff\xfe utf8")};
  run.spec.timeout.value = std::nullopt;
  run.plan.timeout = std::nullopt;
  run.spec.spec_path.clear();
  air::RunReport report = air::test::sample_report(run);
  report.results[1].state = air::RankResult::State::too_large;
  report.results[1].error = "result file is 20 bytes, over the limit of 10 bytes";
  report.results[1].size_bytes = 20;
  report.results[2].excerpt = "\xc3"; // cut in the middle of a character
  report.exit_code = 130;
  const Json doc = air::summary_json(report);
  CHECK(doc["outcome"]["status"] == "interrupted");
  CHECK(doc["outcome"]["exit_code"] == 130);
  CHECK(doc["outcome"]["root_cause_rank"].is_null());
  CHECK(doc["outcome"]["interrupt_signal"] == 2);
  CHECK(doc["outcome"]["interrupt_signal_name"] == "SIGINT");
  CHECK(doc["spec"]["path"].is_null());
  CHECK(doc["spec"]["settings"]["timeout"]["value"].is_null());
  CHECK(doc["launch"]["timeout_s"].is_null());
  CHECK(doc["ranks"][0]["pid"].is_null());
  CHECK(doc["ranks"][0]["end_order"].is_null());
  CHECK(doc["ranks"][0]["exit"] == Json::parse(R"j({"code": null, "signal": null, "signal_name": null,
      "core_dumped": false, "description": "not started"})j"));
  CHECK(doc["ranks"][1]["result"] == Json::parse(R"j({"state": "too_large",
      "error": "result file is 20 bytes, over the limit of 10 bytes", "size_bytes": 20})j"));
  // Invalid UTF-8 does not make the text rendering throw; it becomes U+FFFD.
  const std::string text = air::summary_text(report);
  CHECK(text.back() == '\n');
  CHECK(text.find("\"excerpt\": \"\xEF\xBF\xBD\"") != std::string::npos);
  CHECK(Json::parse(text)["schema_version"] == 1);
}

TEST_CASE("secret-looking env names are redacted", "[summary]") {
  CHECK(air::looks_secret("HF_TOKEN"));
  CHECK(air::looks_secret("aws_secret_access_key"));
  CHECK(air::looks_secret("DB_PASSWORD"));
  CHECK(air::looks_secret("WANDB_API_KEY"));
  CHECK_FALSE(air::looks_secret("NCCL_DEBUG"));
  CHECK_FALSE(air::looks_secret("OMP_NUM_THREADS"));
}

TEST_CASE("summary validates against docs/summary.schema.json", "[summary]") {
  if (std::system("python3 -c 'import jsonschema' >/dev/null 2>&1") != 0) {
    WARN("python3 with jsonschema not found (Debian: python3-jsonschema); schema check skipped");
    return;
  }
  air::test::TempDir dir;
  const std::string schema = std::string(AIR_TEST_DATA_DIR) + "/../docs/summary.schema.json";
  const auto validate = [&](const air::RunReport& report, const std::string& name) {
    const std::string path = dir.file(name);
    REQUIRE(air::write_file_atomically(path, air::summary_text(report)).ok());
    const std::string cmd = "python3 -c 'import json, sys, jsonschema; "
                            "jsonschema.Draft202012Validator.check_schema(json.load(open(sys.argv[2]))); "
                            "jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), "
                            "cls=jsonschema.Draft202012Validator)' '" +
                            path + "' '" + schema + "'";
    INFO(cmd);
    return std::system(cmd.c_str());
  };
  air::test::SampleRun run;
  air::RunReport report = air::test::sample_report(run);
  CHECK(validate(report, "failed.json") == 0);

  // A refused launch: no selection, no launch, no settings of a spec file that was refused.
  air::test::RefusedRun refused;
  CHECK(validate(air::test::refused_report(refused), "refused.json") == 0);

  // With an environment built for environment.dependencies, then reused.
  air::PreparedEnv env;
  env.active = true;
  env.key = std::string(64, 'a');
  env.path = "/cache/" + env.key;
  env.python = "/cache/.store/x/bin/python";
  env.requirements = 2;
  env.build_seconds = 3.25;
  env.build_log = "/cache/.store/x/air-run-build.log";
  air::RunReport built = air::test::sample_report(run);
  built.python_env = &env;
  CHECK(validate(built, "built.json") == 0);
  env.existed = true;
  CHECK(validate(built, "cached.json") == 0);

  air::test::SampleRun ok_run;
  ok_run.outcome.status = air::RunOutcome::Status::succeeded;
  ok_run.outcome.root_cause_rank = -1;
  ok_run.outcome.reason.clear();
  for (auto& r : ok_run.outcome.ranks) {
    r.status = air::ExitStatus::exited_with(0);
    r.stopped_by_air_run = false;
  }
  air::RunReport ok_report{
      ok_run.spec, ok_run.hardware, ok_run.selection, ok_run.plan, ok_run.outcome, "node-3", 0, {}, {}};
  ok_report.results.resize(4);
  ok_report.errors.resize(4);
  CHECK(validate(ok_report, "ok.json") == 0);

  // Preempted across nodes: the step is the job's, picked by node 0.
  air::test::SampleRun preempted;
  preempted.outcome.status = air::RunOutcome::Status::preempted;
  preempted.outcome.interrupt_signal = 15;
  preempted.outcome.root_cause_rank = -1;
  air::PreemptionReport p;
  p.signal = 15;
  p.stop_step = 53;
  p.polling_ranks = {0, 1};
  p.signalled_ranks = {2};
  p.deadline_s = 29.5;
  p.job_wide = true;
  p.signal_node = 1;
  p.missing_nodes = {2};
  preempted.outcome.preemption = p;
  air::RunReport preempted_report = air::test::sample_report(preempted);
  const Json preemption = air::summary_json(preempted_report)["outcome"]["preemption"];
  CHECK(preemption["decided_by"] == "job");
  CHECK(preemption["signal_node"] == 1);
  CHECK(preemption["missing_nodes"] == Json::array({2}));
  CHECK(preemption["fallback"] == false);
  CHECK(preemption["cause"].is_null());
  CHECK(preemption["requeue"].is_null());
  CHECK(validate(preempted_report, "preempted.json") == 0);

  // Slurm's warning, after which node 0 requeued the job.
  p.signal = 10;
  p.cause = "time_limit_warning";
  p.requeue = "requeued";
  preempted.outcome.preemption = p;
  air::RunReport warned_report = air::test::sample_report(preempted);
  const Json warned = air::summary_json(warned_report)["outcome"]["preemption"];
  CHECK(warned["cause"] == "time_limit_warning");
  CHECK(warned["requeue"] == "requeued");
  CHECK(validate(warned_report, "warned.json") == 0);

  // A restarted run: every attempt with its root cause.
  air::test::SampleRun restarted;
  restarted.plan.max_restarts = 1;
  air::AttemptRecord first = air::attempt_record(restarted.plan, restarted.outcome);
  first.error = "RuntimeError: boom";
  first.remote_failure = air::RemoteFailure{1, "node2", 5, 5, "rank 5 exited with exit code 5"};
  restarted.outcome.attempts = {first, air::attempt_record(restarted.plan, restarted.outcome)};
  restarted.outcome.attempts[1].attempt = 1;
  restarted.outcome.attempts[1].resumed_from = "/ckpt/checkpoint-000002";
  restarted.outcome.attempts[1].status = "membership_change"; // the schema knows it
  air::RunReport restarted_report = air::test::sample_report(restarted);
  const Json doc = air::summary_json(restarted_report);
  CHECK(doc["outcome"]["restarts"] == 1);
  CHECK(doc["outcome"]["attempts"].size() == 2);
  CHECK(doc["outcome"]["attempts"][0]["error"] == "RuntimeError: boom");
  CHECK(doc["outcome"]["attempts"][0]["remote_failure"]["node_name"] == "node2");
  CHECK(doc["outcome"]["attempts"][1]["attempt"] == 1);
  CHECK(doc["outcome"]["attempts"][0]["resumed_from"].is_null());
  CHECK(doc["outcome"]["attempts"][1]["resumed_from"] == "/ckpt/checkpoint-000002");
  CHECK(doc["outcome"]["attempts"][0]["status"] == std::string(air::to_string(restarted.outcome.status)));
  CHECK(doc["outcome"]["attempts"][1]["status"] == "membership_change");
  CHECK(doc["launch"]["max_restarts"] == 1);
  CHECK(validate(restarted_report, "restarted.json") == 0);

  // The schema is not vacuous: a document with a wrong type fails it.
  Json broken = air::summary_json(report);
  broken["ranks"][0]["exit"]["signal"] = "15";
  REQUIRE(air::write_file_atomically(dir.file("broken.json"), broken.dump()).ok());
  const std::string cmd = "python3 -c 'import json, sys, jsonschema; "
                          "jsonschema.validate(json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), "
                          "cls=jsonschema.Draft202012Validator)' '" +
                          dir.file("broken.json") + "' '" + schema + "' 2>/dev/null";
  CHECK(std::system(cmd.c_str()) != 0);
}

TEST_CASE("summary: a refused launch says why and shows nothing it did not decide", "[summary]") {
  air::test::RefusedRun run;
  air::RunReport report = air::test::refused_report(run);
  const Json doc = air::summary_json(report);
  CHECK(doc["outcome"]["status"] == "launch_failed");
  CHECK(doc["outcome"]["exit_code"] == 2);
  CHECK(doc["outcome"]["refusal"]["kind"] == "usage");
  CHECK(doc["outcome"]["refusal"]["message"] == run.error.message);
  CHECK(doc["selection"].is_null());
  CHECK(doc["launch"].is_null());
  CHECK(doc["hardware"].is_null());
  CHECK(doc["spec"]["settings"].is_null());
  CHECK(doc["spec"]["path"] == "ci/job.yaml");
  CHECK(doc["ranks"].empty());
  // The spec resolved and the GPUs were looked at: both are shown.
  report.spec_resolved = true;
  report.hardware_probed = true;
  const Json known = air::summary_json(report);
  CHECK(known["spec"]["settings"].is_object());
  CHECK(known["hardware"].is_object());
  // A run that launched has no refusal.
  air::test::SampleRun launched;
  CHECK(air::summary_json(air::test::sample_report(launched))["outcome"]["refusal"].is_null());
}

TEST_CASE("summary: the Python environment, built or reused", "[summary]") {
  air::test::SampleRun run;
  air::RunReport report = air::test::sample_report(run);
  CHECK(air::summary_json(report)["python_env"].is_null());
  air::PreparedEnv env;
  env.active = true;
  env.key = std::string(64, 'b');
  env.requirements = 3;
  env.build_seconds = 12.3456;
  report.python_env = &env;
  Json doc = air::summary_json(report);
  CHECK(doc["python_env"]["cached"] == false);
  CHECK(doc["python_env"]["build_seconds"] == 12.346);
  CHECK(doc["python_env"]["requirements"] == 3);
  env.existed = true;
  doc = air::summary_json(report);
  CHECK(doc["python_env"]["cached"] == true);
  CHECK(doc["python_env"]["build_seconds"].is_null());
  env.active = false; // no dependencies: nothing to say
  CHECK(air::summary_json(report)["python_env"].is_null());
}
