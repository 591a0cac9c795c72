// The human end-of-run report: exact text.
#include "core/report/summary.hpp"
#include "core/report/text.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

TEST_CASE("report: failed run", "[report]") {
  air::test::SampleRun run;
  const air::RunReport report = air::test::sample_report(run);
  CHECK(air::format_report(report) ==
        "air-run: run r1 failed after 12.4s (exit code 3): rank 1 exited with exit code 3\n"
        "  root cause: rank 1 (local_rank 1, pid 4243): exit code 3\n"
        "    RuntimeError: boom\n"
        "      Traceback (most recent call last):\n"
        "        File \"train.py\", line 3, in <module>\n"
        "      RuntimeError: boom\n"
        "    log: /logs/rank1.log\n"
        "  also failed: rank 2 (local_rank 2, pid 4244): signal 11 (SIGSEGV, core dumped)\n"
        "  stopped by air-run: rank 0\n");
}

TEST_CASE("report: root cause without an error file shows the output tail", "[report]") {
  air::test::SampleRun run;
  run.outcome.root_cause_rank = 2;
  run.outcome.reason = "rank 2 died of signal 11 (SIGSEGV, core dumped)";
  run.outcome.ranks[3].stopped_by_air_run = true;
  run.outcome.ranks[3].status = air::ExitStatus::killed_by(9);
  run.plan.tail_lines = 1;
  air::RunReport report = air::test::sample_report(run);
  report.exit_code = 139;
  CHECK(
      air::format_report(report) ==
      "air-run: run r1 failed after 12.4s (exit code 139): rank 2 died of signal 11 (SIGSEGV, core dumped)\n"
      "  root cause: rank 2 (local_rank 2, pid 4244): signal 11 (SIGSEGV, core dumped)\n"
      "    last output lines:\n"
      "      ... (1 earlier line)\n"
      "      Fatal Python error: Segmentation fault\n"
      "  also failed: rank 1 (local_rank 1, pid 4243): exit code 3: RuntimeError: boom\n"
      "  stopped by air-run: ranks 0, 3\n");
}

TEST_CASE("report: on a node of several, each of air-run's lines names the node", "[report][speaker]") {
  air::test::SampleRun run;
  run.plan.node_rank = 1;
  run.plan.num_nodes = 2;
  run.outcome.console_lines_dropped = 3;
  run.outcome.leftover_processes = 1;
  run.outcome.leftover_names = {"sleep 100 (pid 99)"};
  const air::RunReport report = air::test::sample_report(run);
  CHECK(air::format_report(report) ==
        "air-run (node 1): run r1 failed after 12.4s (exit code 3): rank 1 exited with exit code 3\n"
        "  root cause: rank 1 (local_rank 1, pid 4243): exit code 3\n"
        "    RuntimeError: boom\n"
        "      Traceback (most recent call last):\n"
        "        File \"train.py\", line 3, in <module>\n"
        "      RuntimeError: boom\n"
        "    log: /logs/rank1.log\n"
        "  also failed: rank 2 (local_rank 2, pid 4244): signal 11 (SIGSEGV, core dumped)\n"
        "  stopped by air-run: rank 0\n"
        "air-run (node 1): warning: 3 lines of rank output not shown on the console (it stopped taking "
        "output)\n"
        "air-run (node 1): ended 1 process that the ranks left running: sleep 100 (pid 99)\n");
}

TEST_CASE("report: succeeded run is one line", "[report]") {
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::succeeded;
  run.outcome.root_cause_rank = -1;
  run.outcome.reason.clear();
  run.outcome.duration_s = 125.2;
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 0, {}, {}};
  CHECK(air::format_report(report) == "air-run: run r1 succeeded after 2m05s: 4 ranks exited 0\n");
  run.outcome.ranks.resize(1);
  run.outcome.duration_s = 0.04;
  CHECK(air::format_report(report) == "air-run: run r1 succeeded after 0.0s: 1 rank exited 0\n");
}

TEST_CASE("report: timeout stops every rank", "[report]") {
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::timed_out;
  run.outcome.root_cause_rank = -1;
  run.outcome.reason = "timeout of 1h30m reached";
  run.outcome.duration_s = 5400.4;
  for (auto& r : run.outcome.ranks) {
    r.stopped_by_air_run = true;
    r.status = air::ExitStatus::killed_by(15);
  }
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 124, {}, {}};
  report.errors.resize(4);
  report.results.resize(4);
  CHECK(air::format_report(report) ==
        "air-run: run r1 timed out after 1h30m00s (exit code 124): timeout of 1h30m reached\n"
        "  stopped by air-run: ranks 0-3\n");
}

TEST_CASE("report: a preemption across nodes says whose step it is", "[report][preempt]") {
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::preempted;
  run.outcome.interrupt_signal = 15;
  run.outcome.root_cause_rank = -1;
  run.outcome.reason = "preempted by SIGTERM on node 1; every node's ranks stop at step 53";
  run.outcome.duration_s = 2.4;
  air::PreemptionReport p;
  p.signal = 15;
  p.stop_step = 53;
  p.polling_ranks = {0, 1};
  p.job_wide = true;
  p.signal_node = 1;
  p.missing_nodes = {2};
  p.stopped_ranks = {0, 1};
  run.outcome.preemption = p;
  for (int i : {0, 1}) {
    run.outcome.ranks[i] = air::test::make_rank(i, 100 + i, air::ExitStatus::exited_with(0), 2.0);
    run.outcome.ranks[i].steps = 53;
    run.outcome.ranks[i].stopped_by_air_run = true;
  }
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 143, {}, {}};
  report.errors.resize(4);
  report.results.resize(4);
  const std::string text = air::format_report(report);
  INFO(text);
  CHECK(text.find("  asked to stop at step 53 (air.should_stop()): ranks 0-1\n"
                  "  stopped at step 53: ranks 0-1\n"
                  "  the stop step is the job's, picked by node 0 for every node (the signal reached node 1 "
                  "first); without node 2, which sent no step count\n") != std::string::npos);
  p.job_wide = false;
  p.fallback = true;
  run.outcome.preemption = p; // the report holds the outcome by reference
  CHECK(air::format_report(report).find("  node 0 did not pick a stop step in time: this node's own") !=
        std::string::npos);
}

TEST_CASE("report: a rank asked to stop that another's SIGTERM killed is not said to have stopped",
          "[report][preempt]") {
  // Slurm signals every process of the step: a rank that died of that
  // SIGTERM before the stop step saved nothing, and the report says so.
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::preempted;
  run.outcome.interrupt_signal = 15;
  run.outcome.root_cause_rank = -1;
  run.outcome.reason = "preempted by SIGTERM; ranks stop at step 37";
  run.outcome.ranks.resize(2);
  run.outcome.ranks[0] = air::test::make_rank(0, 100, air::ExitStatus::killed_by(15), 2.0);
  run.outcome.ranks[0].steps = 36;
  run.outcome.ranks[1] = air::test::make_rank(1, 101, air::ExitStatus::exited_with(0), 2.0);
  run.outcome.ranks[1].steps = 37;
  run.outcome.ranks[1].stopped_by_air_run = true;
  air::PreemptionReport p;
  p.signal = 15;
  p.stop_step = 37;
  p.polling_ranks = {0, 1};
  p.stopped_ranks = {1};
  run.outcome.preemption = p;
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 143, {}, {}};
  report.errors.resize(2);
  report.results.resize(2);
  const std::string text = air::format_report(report);
  INFO(text);
  CHECK(text.find("  asked to stop at step 37 (air.should_stop()): ranks 0-1\n"
                  "  stopped at step 37: rank 1\n"
                  "  rank 0 did not stop at step 37: killed by SIGTERM at step 36, a signal air-run did not "
                  "send\n") != std::string::npos);
  CHECK(text.find("root cause") == std::string::npos); // the lines above say it; no "failure" of its own
  CHECK(text.find("also failed") == std::string::npos);
  CHECK(text.find("  stopped by air-run: rank 1\n") != std::string::npos);
}

TEST_CASE("report: a rank that could not be started", "[report]") {
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::launch_failed;
  run.outcome.root_cause_rank = -1; // no supervisor choice: the first failed rank stands in
  run.outcome.reason = "rank 0 could not be started";
  run.outcome.duration_s = 0.2;
  run.outcome.ranks.resize(2);
  run.outcome.ranks[0] = air::test::make_rank(0, -1, air::ExitStatus::exited_with(127), 0);
  run.outcome.ranks[0].spawn_error = "execve trian.py: No such file or directory";
  run.outcome.ranks[1] = air::test::make_rank(1, -1, air::ExitStatus{}, 0);
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 127, {}, {}};
  report.errors = {air::rank_error(run.outcome.ranks[0], std::nullopt), std::nullopt};
  CHECK(air::format_report(report) ==
        "air-run: run r1 could not be launched after 0.2s (exit code 127): rank 0 could not be started\n"
        "  root cause: rank 0 (local_rank 0): could not be started: execve trian.py: No such file or "
        "directory\n");
}

TEST_CASE("duration formatting", "[report]") {
  CHECK(air::format_seconds(0) == "0.0s");
  CHECK(air::format_seconds(12.41) == "12.4s");
  CHECK(air::format_seconds(59.94) == "59.9s");
  CHECK(air::format_seconds(59.96) == "1m00s");
  CHECK(air::format_seconds(3599.6) == "1h00m00s");
  CHECK(air::format_seconds(3725) == "1h02m05s");
  CHECK(air::format_seconds(-1) == "0.0s");
  CHECK(air::format_seconds(1e300) == "277777777h46m40s");
}

TEST_CASE("report: stopped ranks fold into ranges", "[report]") {
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::interrupted;
  run.outcome.root_cause_rank = -1;
  run.outcome.reason = "air-run received SIGINT";
  run.outcome.ranks.clear();
  for (int i = 0; i < 8; ++i) {
    air::RankOutcome r = air::test::make_rank(i, 100 + i, air::ExitStatus::killed_by(2), 1);
    r.stopped_by_air_run = i != 1 && i != 6; // 1 and 6 had already exited 0
    if (!r.stopped_by_air_run) r.status = air::ExitStatus::exited_with(0);
    run.outcome.ranks.push_back(r);
  }
  std::swap(run.outcome.ranks[0], run.outcome.ranks[7]); // order in the outcome does not matter
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 130, {}, {}};
  CHECK(air::format_report(report) ==
        "air-run: run r1 was interrupted after 12.4s (exit code 130): air-run received SIGINT\n"
        "  stopped by air-run: ranks 0, 2-5, 7\n");
}

TEST_CASE("report: lost output and leftover processes are said, whatever the status", "[report]") {
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::succeeded;
  run.outcome.root_cause_rank = -1;
  run.outcome.reason.clear();
  run.outcome.duration_s = 1;
  run.outcome.ranks.resize(2);
  run.outcome.ranks[1].log_error = "write /logs/rank1.log: No space left on device";
  run.outcome.console_lines_dropped = 1;
  run.outcome.leftover_processes = 2;
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 0, {}, {}};
  CHECK(air::format_report(report) ==
        "air-run: run r1 succeeded after 1.0s: 2 ranks exited 0\n"
        "air-run: warning: rank 1's log is incomplete: write /logs/rank1.log: No space left on device\n"
        "air-run: warning: 1 line of rank output not shown on the console (it stopped taking output)\n"
        "air-run: ended 2 processes that the ranks left running\n");
  run.outcome.ranks[1].log_error.clear();
  run.outcome.console_lines_dropped = 0;
  run.outcome.leftover_processes = 0;
  CHECK(air::format_warnings(run.outcome).empty());
}

TEST_CASE("report: a failed import names the interpreter and how to choose another", "[report]") {
  air::test::SampleRun run;
  run.spec.python.value = "/usr/bin/python3";
  air::RunReport report = air::test::sample_report(run);
  air::ErrorFileRecord rec;
  rec.type = "ModuleNotFoundError";
  rec.message = "No module named 'torch'";
  rec.traceback = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'torch'\n";
  report.errors[1] = air::rank_error(run.outcome.ranks[1], rec);
  const std::string text = air::format_report(report);
  CHECK(text.find("    log: /logs/rank1.log\n"
                  "    Python: /usr/bin/python3 (environment.python, default); --python or AIR_RUN_PYTHON "
                  "picks another\n") != std::string::npos);
  // Any other failure does not mention it, nor does a target run without Python.
  CHECK(air::format_report(air::test::sample_report(run)).find("Python:") == std::string::npos);
  run.spec.no_python.value = true;
  CHECK(air::format_report(report).find("Python:") == std::string::npos);
}

TEST_CASE("report: a message of several lines keeps the indentation", "[report]") {
  air::test::SampleRun run;
  air::RunReport report = air::test::sample_report(run);
  report.errors[1]->message = "shapes differ:\n  a: [2, 3]\n  b: [3, 2]";
  report.errors[2] = report.errors[1];
  const std::string text = air::format_report(report);
  CHECK(text.find("    RuntimeError: shapes differ:\n      a: [2, 3]\n      b: [3, 2]\n      Traceback") !=
        std::string::npos);
  CHECK(text.find("  also failed: rank 2 (local_rank 2, pid 4244): signal 11 (SIGSEGV, core dumped): "
                  "RuntimeError: shapes differ: ...\n  stopped by air-run") != std::string::npos);
}

TEST_CASE("report: the processes the ranks left running are named", "[report]") {
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::succeeded;
  run.outcome.root_cause_rank = -1;
  run.outcome.reason.clear();
  run.outcome.duration_s = 1;
  run.outcome.ranks.resize(2);
  run.outcome.leftover_processes = 1;
  run.outcome.leftover_names = {"pid 4711 sleep (sleep 1000)"};
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 0, {}, {}};
  CHECK(air::format_report(report) == "air-run: run r1 succeeded after 1.0s: 2 ranks exited 0\n"
                                      "air-run: ended 1 process that the ranks left running: pid 4711 sleep "
                                      "(sleep 1000)\n");
  run.outcome.leftover_processes = 3;
  run.outcome.leftover_names = {"pid 1 a (a)", "pid 2 b (b -x)"};
  CHECK(air::format_report(report) == "air-run: run r1 succeeded after 1.0s: 2 ranks exited 0\n"
                                      "air-run: ended 3 processes that the ranks left running:\n"
                                      "  pid 1 a (a)\n  pid 2 b (b -x)\n  and 1 more\n");
}

TEST_CASE("report: an interrupted run names the latest checkpoint", "[report]") {
  // Ctrl-C during training: only a preemption said it before.
  air::test::SampleRun run;
  run.outcome.status = air::RunOutcome::Status::interrupted;
  run.outcome.root_cause_rank = -1;
  run.outcome.reason = "interrupted by SIGINT";
  run.outcome.ranks.resize(1);
  run.outcome.ranks[0].stopped_by_air_run = true;
  run.outcome.checkpoint = "/ckpt/checkpoint-000007";
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 130, {}, {}};
  const std::string text = air::format_report(report);
  CHECK(text.find("  latest checkpoint: /ckpt/checkpoint-000007\n") != std::string::npos);
  CHECK(air::summary_json(report)["outcome"]["checkpoint"] == "/ckpt/checkpoint-000007");
  run.outcome.checkpoint.clear();
  CHECK(air::format_report(report).find("latest checkpoint") == std::string::npos);
  CHECK(air::summary_json(report)["outcome"]["checkpoint"].is_null());
}
