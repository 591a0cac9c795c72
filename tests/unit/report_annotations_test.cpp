// GitHub Actions workflow commands for failed ranks.
#include "core/report/annotations.hpp"
#include "core/report/bounded.hpp"
#include "core/report/junit.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

TEST_CASE("annotations: enabled only under GitHub Actions", "[annotations]") {
  CHECK(air::github_actions_enabled({{"GITHUB_ACTIONS", "true"}}));
  CHECK_FALSE(air::github_actions_enabled({{"GITHUB_ACTIONS", "false"}}));
  CHECK_FALSE(air::github_actions_enabled({{"GITHUB_ACTIONS", "1"}}));
  CHECK_FALSE(air::github_actions_enabled({}));
}

TEST_CASE("annotations: GitHub's escaping", "[annotations]") {
  CHECK(air::escape_workflow_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b");
  CHECK(air::escape_workflow_data("%0A") == "%250A");
  CHECK(air::escape_workflow_property("a: b, c%\n") == "a%3A b%2C c%25%0A");
}

TEST_CASE("annotations: one error per failed rank", "[annotations]") {
  air::test::SampleRun run;
  const air::RunReport report = air::test::sample_report(run);
  const std::vector<std::string> lines = air::github_annotations(report);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == "::error file=train.py,line=3,title=air-run rank 1::rank 1 failed with exit code 3: "
                    "RuntimeError: boom%0A"
                    "Traceback (most recent call last):%0A  File \"train.py\", line 3, in <module>%0A"
                    "RuntimeError: boom");
  CHECK(lines[1] == "::error title=air-run rank 2::rank 2 failed with signal 11 (SIGSEGV, core dumped)%0A"
                    "step 7%0AFatal Python error: Segmentation fault");
}

TEST_CASE("annotations: runs without a failed rank", "[annotations]") {
  air::test::SampleRun run;
  air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 0, {}, {}};
  for (auto& r : run.outcome.ranks) {
    r.stopped_by_air_run = true;
    r.status = air::ExitStatus::killed_by(15);
  }
  SECTION("timeout") {
    run.outcome.status = air::RunOutcome::Status::timed_out;
    run.outcome.reason = "timeout of 100% reached";
    report.exit_code = 124;
    CHECK(air::github_annotations(report) ==
          std::vector<std::string>{"::error title=air-run::timeout of 100%25 reached (exit code 124)"});
  }
  SECTION("interrupted without a reason") {
    run.outcome.status = air::RunOutcome::Status::interrupted;
    run.outcome.reason.clear();
    report.exit_code = 130;
    CHECK(air::github_annotations(report) ==
          std::vector<std::string>{"::error title=air-run::run interrupted (exit code 130)"});
  }
  SECTION("success gives none") {
    run.outcome.status = air::RunOutcome::Status::succeeded;
    CHECK(air::github_annotations(report).empty());
  }
  SECTION("spawn failure") {
    run.outcome.status = air::RunOutcome::Status::launch_failed;
    run.outcome.ranks.resize(1);
    run.outcome.ranks[0] = air::test::make_rank(0, -1, air::ExitStatus::exited_with(126), 0);
    run.outcome.ranks[0].spawn_error = "execve ./x: Permission denied";
    report.errors = {air::rank_error(run.outcome.ranks[0], std::nullopt)};
    CHECK(air::github_annotations(report) ==
          std::vector<std::string>{
              "::error title=air-run rank 0::rank 0 could not be started: execve ./x: Permission denied"});
  }
}

TEST_CASE("annotations: file and line from the traceback, relative to the workspace", "[annotations]") {
  air::test::SampleRun run;
  air::RunReport report = air::test::sample_report(run);
  report.errors[1]->traceback = "Traceback (most recent call last):\n"
                                "  File \"/home/runner/work/repo/train.py\", line 40, in <module>\n"
                                "    main()\n"
                                "  File \"/home/runner/work/repo/model/net.py\", line 7, in main\n"
                                "    raise RuntimeError('boom')\n"
                                "RuntimeError: boom\n";
  const auto lines = air::github_annotations(report, "/home/runner/work/repo/");
  REQUIRE(lines.size() == 2);
  CHECK(
      lines[0].rfind("::error file=model/net.py,line=7,title=air-run rank 1::rank 1 failed with exit code 3: "
                     "RuntimeError: boom%0ATraceback",
                     0) == 0);
  // Outside the workspace the path stays absolute; no frame, no file=.
  const auto outside = air::github_annotations(report, "/elsewhere");
  CHECK(outside[0].rfind("::error file=/home/runner/work/repo/model/net.py,line=7,", 0) == 0);
  CHECK(lines[1].rfind("::error title=air-run rank 2::", 0) == 0);
}

TEST_CASE("annotations: the step summary's Markdown, exactly", "[annotations]") {
  air::test::SampleRun run;
  run.outcome.ranks[2].tail = {"x | y", "ValueError: a|b"};
  air::RunReport report = air::test::sample_report(run);
  report.errors[2]->traceback = "x | y\nValueError: a|b\n";
  CHECK(air::github_step_summary(report) ==
        "### air-run job: failed (exit code 3)\n\n"
        "rank 1 exited with exit code 3\n\n"
        "| rank | status | time | error |\n"
        "|---:|---|---:|---|\n"
        "| 0 | stopped by air-run | 12.3s |  |\n"
        "| 1 | failed (root cause): exit code 3 | 1.2s | `RuntimeError: boom` |\n"
        "| 2 | failed: signal 11 (SIGSEGV, core dumped) | 1.5s | `ValueError: a\\|b` |\n"
        "| 3 | ok | 0.8s |  |\n"
        "\nrun `r1`, 4 ranks, 12.4s\n");
}

TEST_CASE("annotations: the place a message starts with", "[annotations]") {
  const auto place = air::message_place("ci/job.yaml:12:3: unknown key 'tiemout'");
  REQUIRE(place);
  CHECK(place->file == "ci/job.yaml");
  CHECK(place->line == 12);
  CHECK(air::message_place("reqs.txt:4: '-r other.txt': not supported")->line == 4);
  CHECK_FALSE(air::message_place("--timeout: expected a duration like 90m, got '3x'"));
  CHECK_FALSE(air::message_place("requested GPU_8xH100, found no GPU (NVML not available: x)"));
  CHECK_FALSE(air::message_place("job.yaml: cannot read"));
  CHECK_FALSE(air::message_place("job.yaml:12"));
  CHECK_FALSE(air::message_place("job.yaml:99999999999: x")); // no overflow
  CHECK_FALSE(air::message_place(":3: x"));
}

TEST_CASE("annotations: a refused launch points at the spec's line", "[annotations]") {
  air::test::RefusedRun run;
  const air::RunReport report = air::test::refused_report(run);
  CHECK(air::github_annotations(report, "/ws") ==
        std::vector<std::string>{
            "::error file=ci/job.yaml,line=2,title=air-run%3A launch refused::ci/job.yaml:2:1: "
            "unknown key 'tiemout' (did you mean 'timeout'?) (exit code 2)"});
  run.error = {air::ErrorKind::hardware, "requested GPU_8xH100, found no GPU"};
  run.outcome.reason = run.error.message;
  CHECK(air::github_annotations(air::test::refused_report(run)) ==
        std::vector<std::string>{
            "::error title=air-run%3A launch refused::requested GPU_8xH100, found no GPU (exit code 2)"});
  CHECK(air::github_step_summary(air::test::refused_report(run)) ==
        "### air-run job: could not be launched (exit code 2)\n\nrequested GPU_8xH100, found no GPU\n\n"
        "Nothing was launched.\n");
}

TEST_CASE("annotations: a refused spec's file is relative to GITHUB_WORKSPACE, not the directory",
          "[annotations]") {
  // `air-run job.yaml` run in $GITHUB_WORKSPACE/ci: the message names job.yaml.
  air::test::RefusedRun run;
  run.error.message = "job.yaml:2:1: unknown key 'tiemout' (did you mean 'timeout'?)";
  run.outcome.reason = run.error.message;
  const air::RunReport report = air::test::refused_report(run);
  const std::string tail =
      ",line=2,title=air-run%3A launch refused::job.yaml:2:1: unknown key 'tiemout' (did "
      "you mean 'timeout'?) (exit code 2)";
  CHECK(air::github_annotations(report, "/ws", "/ws/ci") ==
        std::vector<std::string>{"::error file=ci/job.yaml" + tail});
  CHECK(air::github_annotations(report, "/ws/", "/ws/ci/") ==
        std::vector<std::string>{"::error file=ci/job.yaml" + tail});
  // Outside the workspace: the absolute path; no directory known: as typed.
  CHECK(air::github_annotations(report, "/ws", "/elsewhere") ==
        std::vector<std::string>{"::error file=/elsewhere/job.yaml" + tail});
  CHECK(air::github_annotations(report, "/ws") == std::vector<std::string>{"::error file=job.yaml" + tail});
  CHECK(air::github_annotations(report, "", "/ws/ci") ==
        std::vector<std::string>{"::error file=job.yaml" + tail});
  run.error.message = "./job.yaml:2:1: unknown key 'tiemout' (did you mean 'timeout'?)";
  run.outcome.reason = run.error.message;
  CHECK(air::github_annotations(air::test::refused_report(run), "/ws", "/ws/ci")
            .front()
            .rfind("::error file=ci/job.yaml,line=2,", 0) == 0);
}

TEST_CASE("annotations, step summary and JUnit stay inside their consumers' limits", "[annotations]") {
  // A rank's 1.5 MiB message made a 1.57 MB step summary, which GitHub
  // refuses whole (1 MiB), and an annotation beyond the Checks API's 64 KiB.
  air::test::SampleRun run;
  air::RunReport report = air::test::sample_report(run);
  const std::string huge = "HEAD" + std::string(3 * 512 * 1024, 'x') + "TAIL";
  report.errors[1]->message = huge;
  report.errors[1]->traceback =
      "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
      "RuntimeError: " +
      huge + "\n";
  run.outcome.reason = "rank 1 failed: RuntimeError: " + huge; // the report holds a reference
  const std::string summary = air::github_step_summary(report);
  CHECK(summary.size() < 20'000);
  CHECK(summary.find("`RuntimeError: HEADxxx") != std::string::npos);
  const auto lines = air::github_annotations(report);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].size() < 64 * 1024);
  CHECK(lines[0].find("RuntimeError: HEADxxx") != std::string::npos);
  CHECK(lines[0].find("bytes cut ...]") != std::string::npos);
  CHECK(lines[0].find("xxxTAIL") != std::string::npos); // the traceback's end is kept
  const std::string junit = air::junit_xml(report);
  CHECK(junit.size() < 200 * 1024);
  CHECK(junit.find("xxxTAIL") != std::string::npos);

  // 4,096 failed ranks: the summary stays under 1 MiB whole, and GitHub,
  // which shows 10 errors a step, gets 9 and one that counts the rest.
  air::test::SampleRun wide;
  air::RunReport many = air::test::sample_report(wide);
  wide.outcome.ranks.clear();
  many.errors.clear();
  for (int i = 0; i < 4096; ++i) {
    wide.outcome.ranks.push_back(air::test::make_rank(i, 1000 + i, air::ExitStatus::exited_with(1), 1.0));
    air::RankError e;
    e.source = air::RankError::Source::error_file;
    e.type = "RuntimeError";
    e.message = std::string(1500, 'm');
    many.errors.emplace_back(e);
  }
  CHECK(air::github_step_summary(many).size() < 1024 * 1024);
  CHECK(air::github_step_summary(many).find("more ranks: the JUnit report and the summary JSON have them") !=
        std::string::npos);
  const auto errors = air::github_annotations(many);
  REQUIRE(errors.size() == 10);
  CHECK(errors[9].find("4087 more ranks failed (9, 10, 11,") != std::string::npos);
}

TEST_CASE("bounded text keeps a head and a tail at character starts", "[annotations]") {
  CHECK(air::bounded_text("short", 100) == "short");
  const std::string text = std::string(300, 'a') + "\xc3\xa9" + std::string(300, 'b');
  const std::string cut = air::bounded_text(text, 200);
  CHECK(cut.size() <= 200);
  CHECK(cut.find("bytes cut ...]") != std::string::npos);
  CHECK(cut.front() == 'a');
  CHECK(cut.back() == 'b');
  CHECK(air::bounded_head("abcd\xc3\xa9xyz", 8) == "abcd..."); // never half of the é
}
