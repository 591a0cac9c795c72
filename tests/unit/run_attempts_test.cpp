// Restarts and rendezvous keys: the pure parts (attempt plans and records,
// the report's attempt lines, the torchrun rendezvous keys).
#include "core/report/text.hpp"
#include "core/run/attempts.hpp"
#include "core/spec/spec.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

namespace {

using Flags = std::vector<std::tuple<std::string, std::string, std::string>>;

air::Expected<air::ResolvedSpec> resolve_flags(Flags flags, std::string yaml = "") {
  air::SpecInputs in;
  if (!yaml.empty()) {
    in.file_text = std::move(yaml);
    in.file_path = "job.yaml";
  }
  in.flags = std::move(flags);
  return air::resolve_spec(in);
}

air::LaunchSpec launch_spec_ok(Flags flags, std::string yaml = "") {
  auto r = resolve_flags(std::move(flags), std::move(yaml));
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return r->spec;
}

std::string resolve_error(Flags flags, std::string yaml = "") {
  auto r = resolve_flags(std::move(flags), std::move(yaml));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == air::ErrorKind::usage);
  return r.error().message;
}

} // namespace

TEST_CASE("attempt plans count restarts and take a fresh port and their own logs", "[attempts]") {
  air::test::SampleRun run;
  air::LaunchPlan first = run.plan;
  first.max_restarts = 3;
  first.master_port = 29500;
  for (auto& r : first.ranks) {
    r.env["TORCHELASTIC_RESTART_COUNT"] = "0";
    r.env["MASTER_PORT"] = "29500";
  }
  const air::LaunchPlan second = air::plan_for_attempt(first, 2, 41000, air::Millis(5000));
  CHECK(second.attempt == 2);
  CHECK(second.master_port == 41000);
  CHECK(second.timeout == std::optional<air::Millis>(air::Millis(5000)));
  REQUIRE(second.ranks.size() == first.ranks.size());
  for (const auto& r : second.ranks) {
    CHECK(r.env.at("TORCHELASTIC_RESTART_COUNT") == "2");
    CHECK(r.env.at("MASTER_PORT") == "41000");
  }
  CHECK(second.ranks[1].log_file == "/logs/rank1.attempt2.log");
  CHECK(first.ranks[1].log_file == "/logs/rank1.log"); // the first attempt's plan is untouched
  CHECK(air::plan_for_attempt(first, 0, 29500, std::nullopt).ranks[1].log_file == "/logs/rank1.log");
}

TEST_CASE("attempt plans move torchrun's -r/-t files to the attempt's folder", "[attempts]") {
  air::test::SampleRun run;
  air::LaunchPlan first = run.plan;
  first.ranks[0].stream_files[0] = "/logs/r1_abc/attempt_0/0/stdout.log";
  first.ranks[0].stream_files[1] = "/logs/r1_abc/attempt_0/0/stderr.log";
  first.ranks[0].error_file = "/logs/r1_abc/attempt_0/0/error.json";
  first.ranks[1].error_file = "/logs/attempt_0/rank1.error.json"; // air-run's own: stays
  const air::LaunchPlan second = air::plan_for_attempt(first, 2, 41000, std::nullopt);
  CHECK(second.ranks[0].stream_files[0] == "/logs/r1_abc/attempt_2/0/stdout.log");
  CHECK(second.ranks[0].stream_files[1] == "/logs/r1_abc/attempt_2/0/stderr.log");
  CHECK(second.ranks[0].error_file == "/logs/r1_abc/attempt_2/0/error.json");
  CHECK(second.ranks[0].env.at("TORCHELASTIC_ERROR_FILE") == "/logs/r1_abc/attempt_2/0/error.json");
  CHECK(second.ranks[1].error_file == "/logs/attempt_0/rank1.error.json");
  CHECK(second.ranks[1].stream_files[0].empty());
}

TEST_CASE("only a failed group may restart", "[attempts]") {
  air::RunOutcome o;
  o.status = air::RunOutcome::Status::failed;
  CHECK(air::restartable_outcome(o));
  for (auto s : {air::RunOutcome::Status::succeeded, air::RunOutcome::Status::timed_out,
                 air::RunOutcome::Status::interrupted, air::RunOutcome::Status::launch_failed}) {
    o.status = s;
    CHECK_FALSE(air::restartable_outcome(o));
  }
}

TEST_CASE("an attempt's record keeps its root cause", "[attempts]") {
  air::test::SampleRun run;
  run.plan.master_port = 30001;
  run.plan.attempt = 1;
  const air::AttemptRecord r = air::attempt_record(run.plan, run.outcome);
  CHECK(r.attempt == 1);
  CHECK(r.exit_code == 3);
  CHECK(r.root_cause_rank == 1);
  CHECK(r.reason == "rank 1 exited with exit code 3");
  CHECK(r.master_port == 30001);
}

TEST_CASE("report: every restarted attempt is one line", "[attempts][report]") {
  air::test::SampleRun run;
  run.plan.max_restarts = 2;
  air::AttemptRecord a0;
  a0.attempt = 0;
  a0.exit_code = 7;
  a0.root_cause_rank = 0;
  a0.reason = "rank 0 exited with exit code 7";
  a0.error = "ValueError: bad batch";
  a0.duration_s = 2.5;
  air::AttemptRecord a1 = air::attempt_record(run.plan, run.outcome);
  a1.attempt = 1;
  run.outcome.attempts = {a0, a1};
  const air::RunReport report = air::test::sample_report(run);
  const std::string text = air::format_report(report);
  CHECK(text.rfind("air-run: run r1 failed after 12.4s and 1 restart (exit code 3): rank 1 exited with exit "
                   "code 3\n"
                   "  attempt 0 failed after 2.5s (exit code 7): rank 0 exited with exit code 7: "
                   "ValueError: bad batch; restart 1 of 2 followed\n"
                   "  root cause: rank 1",
                   0) == 0);
}

TEST_CASE("an attempt ended to admit a node is a membership change, not a failure", "[attempts][join]") {
  air::test::SampleRun run;
  CHECK(air::attempt_record(run.plan, run.outcome).status == "failed");
  air::RemoteFailure change;
  change.node_rank = 0;
  change.reason = "node3 joined; the worker group restarts with 3 nodes";
  change.membership_change = true;
  run.outcome.remote_failure = change;
  run.outcome.reason = air::remote_failure_reason(change);
  const air::AttemptRecord r = air::attempt_record(run.plan, run.outcome);
  CHECK(r.status == "membership_change");
  CHECK(r.reason == "stopped for a membership change: node3 joined; the worker group restarts with 3 nodes");

  // The report says so, and counts only the restarts after a failure.
  air::test::SampleRun later;
  later.plan.max_restarts = 1;
  air::AttemptRecord failed = air::attempt_record(later.plan, later.outcome);
  failed.attempt = 1;
  failed.duration_s = 1;
  air::AttemptRecord last = air::attempt_record(later.plan, later.outcome);
  last.attempt = 2;
  air::AttemptRecord first = r;
  first.duration_s = 4;
  later.outcome.attempts = {first, failed, last};
  const std::string text = air::format_report(air::test::sample_report(later));
  CHECK(
      text.find("  attempt 0 ended after 4.0s: stopped for a membership change: node3 joined; the worker "
                "group restarts with 3 nodes; attempt 1 followed (a membership change: no restart counted)\n"
                "  attempt 1 failed after 1.0s (exit code 3): rank 1 exited with exit code 3; restart 1 of 1 "
                "followed\n") != std::string::npos);
}

TEST_CASE("nnodes takes N or MIN:MAX", "[spec][rendezvous]") {
  auto s = launch_spec_ok({{"nnodes", "1:4", "--nnodes"},
                           {"rdzv_backend", "c10d", "--rdzv-backend"},
                           {"rdzv_endpoint", "h:1", "--rdzv-endpoint"}});
  CHECK(s.nnodes_min.value == 1);
  CHECK(s.nnodes.value == 4);
  s = launch_spec_ok({}, "nnodes: 3\n");
  CHECK(s.nnodes_min.value == 3);
  CHECK(s.nnodes.value == 3);
  CHECK(resolve_error({{"nnodes", "4:2", "--nnodes"}}) ==
        "--nnodes: MIN must not exceed MAX in MIN:MAX, got '4:2'");
  CHECK(resolve_error({{"nnodes", "0:2", "--nnodes"}}) == "--nnodes: must be between 1 and 100000, got 0");
  CHECK(resolve_error({{"nnodes", "1:2", "--nnodes"}}) ==
        "--nnodes: MIN:MAX needs rdzv_backend c10d; static rendezvous runs a fixed number of nodes");
}

TEST_CASE("rendezvous keys: backend, endpoint, id, conf, standalone", "[spec][rendezvous]") {
  CHECK(resolve_error({{"rdzv_backend", "etcd-v2", "--rdzv-backend"}}) ==
        "--rdzv-backend: 'etcd-v2' is not supported; air-run's rendezvous backends are static and c10d");
  CHECK(
      resolve_error({{"rdzv_backend", "c10d", "--rdzv-backend"}, {"nnodes", "2", "--nnodes"}}) ==
      "--rdzv-backend: c10d on several nodes needs rdzv_endpoint HOST[:PORT], the agent that hosts the join");

  // static: the endpoint is the master
  auto s = launch_spec_ok({{"rdzv_endpoint", "node7:29603", "--rdzv-endpoint"}});
  CHECK(s.master_addr.value == "node7");
  CHECK(s.master_port.value == 29603);
  CHECK(s.master_port.origin.describe() == "flag --rdzv-endpoint");

  // c10d keeps master_addr for the join (placement decides)
  s = launch_spec_ok({{"rdzv_backend", "c10d", "--rdzv-backend"},
                      {"rdzv_endpoint", "[fe80::1]:29400", "--rdzv-endpoint"},
                      {"nnodes", "2", "--nnodes"}});
  CHECK(s.master_addr.value == "127.0.0.1");

  s = launch_spec_ok({{"rdzv_id", "job-42", "--rdzv-id"}});
  CHECK(s.run_id.value == "job-42");
  s = launch_spec_ok({{"rdzv_id", "job-42", "--rdzv-id"}, {"run_id", "mine", "--run-id"}});
  CHECK(s.run_id.value == "mine");
  CHECK(resolve_error({{"rdzv_id", "a/b", "--rdzv-id"}}) ==
        "--rdzv-id: becomes the run id, which may contain only letters, digits, '.', '_' and '-', got 'a/b'");

  s = launch_spec_ok(
      {{"rdzv_conf", "join_timeout=900,last_call_timeout=5,read_timeout=120,is_host=false", "--rdzv-conf"}});
  CHECK(s.join_timeout.value == air::Millis(900'000));
  CHECK(s.last_call_timeout.value == air::Millis(5'000));
  CHECK(s.read_timeout.value == std::optional<air::Millis>(air::Millis(120'000)));
  // an explicit --join-timeout wins over rdzv_conf's
  s = launch_spec_ok(
      {{"rdzv_conf", "join_timeout=900", "--rdzv-conf"}, {"join_timeout", "1m", "--join-timeout"}});
  CHECK(s.join_timeout.value == air::Millis(60'000));
  CHECK(resolve_error({{"rdzv_conf", "join_timeout", "--rdzv-conf"}}) ==
        "--rdzv-conf: expected KEY=VALUE, got 'join_timeout'");
  CHECK(resolve_error({{"rdzv_conf", "last_call_timeout=0", "--rdzv-conf"}}) ==
        "--rdzv-conf: last_call_timeout: must be greater than zero");

  s = launch_spec_ok({{"standalone", "true", "--standalone"}});
  CHECK(s.rdzv_backend.value == "c10d");
  CHECK(s.nnodes.value == 1);
  // One c10d node binds on the rendezvous host: localhost under --standalone,
  // the endpoint's host otherwise (the launcher then gives the ranks this
  // host's name, cli/nodes.cpp); --master-addr still wins.
  CHECK(s.master_addr.value == "localhost");
  CHECK(s.master_addr.origin.describe() == "flag --standalone");
  s = launch_spec_ok(
      {{"rdzv_backend", "c10d", "--rdzv-backend"}, {"rdzv_endpoint", "localhost:0", "--rdzv-endpoint"}});
  CHECK(s.master_addr.value == "localhost");
  s = launch_spec_ok({{"rdzv_backend", "c10d", "--rdzv-backend"},
                      {"rdzv_endpoint", "localhost:0", "--rdzv-endpoint"},
                      {"master_addr", "10.0.0.5", "--master-addr"}});
  CHECK(s.master_addr.value == "10.0.0.5");
  s = launch_spec_ok({{"rdzv_backend", "c10d", "--rdzv-backend"},
                      {"rdzv_endpoint", "node3:29400", "--rdzv-endpoint"},
                      {"nnodes", "1:2", "--nnodes"}});
  CHECK(s.master_addr.value == "127.0.0.1"); // may grow to two nodes: the join decides
  CHECK(resolve_error({{"standalone", "true", "--standalone"}, {"nnodes", "2", "--nnodes"}}) ==
        "--standalone: runs one node, but --nnodes asks for 2");

  s = launch_spec_ok({{"max_restarts", "3", "--max-restarts"}});
  CHECK(s.max_restarts.value == 3);
}

TEST_CASE("endpoints parse as HOST[:PORT]", "[spec][rendezvous]") {
  auto e = air::parse_endpoint("node1:29400", "x");
  REQUIRE(e.ok());
  CHECK(e->host == "node1");
  CHECK(e->port == 29400);
  e = air::parse_endpoint("node1", "x");
  REQUIRE(e.ok());
  CHECK(e->port == -1);
  e = air::parse_endpoint("[::1]:5", "x");
  REQUIRE(e.ok());
  CHECK(e->host == "::1");
  CHECK(e->port == 5);
  CHECK(air::parse_endpoint("h:99999", "x").error().message == "x: bad port '99999' in 'h:99999'");
  CHECK(air::parse_endpoint(":1", "x").error().message == "x: no host in ':1' (expected HOST[:PORT])");
  CHECK(air::parse_endpoint("h:", "x").error().message == "x: empty port in 'h:'");
}
