// What CI reports pick out of a rank's output: exception line, innermost frame, job name.
#include "core/report/traceback.hpp"
#include "tests/unit/catch.hpp"

TEST_CASE("traceback: the exception line is the last one that reads like an exception", "[traceback]") {
  CHECK(air::exception_line("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
                            "ValueError: bad shape (3, 4)\nshutting down\n") ==
        "ValueError: bad shape (3, 4)");
  CHECK(air::exception_line("torch.distributed.DistBackendError: NCCL error\n") ==
        "torch.distributed.DistBackendError: NCCL error");
  CHECK(air::exception_line("KeyboardInterrupt\n") == "KeyboardInterrupt");
  CHECK(air::exception_line("  RuntimeError: indented\r\n") == "RuntimeError: indented");
  // Not exceptions: prose, an error count, a fatal error banner.
  CHECK(air::exception_line(
            "Error rate is 3%\n2 errors: see log\nFatal Python error: Segmentation fault\n") == "");
  CHECK(air::exception_line("") == "");
}

TEST_CASE("traceback: the innermost frame names the file and line", "[traceback]") {
  const std::string tb = "Traceback (most recent call last):\n"
                         "  File \"/w/train.py\", line 40, in <module>\n"
                         "    main()\n"
                         "  File \"/w/model/net.py\", line 7, in main\n"
                         "  File \"<string>\", line 1, in <lambda>\n"
                         "RuntimeError: boom\n";
  const auto frame = air::innermost_frame(tb);
  REQUIRE(frame);
  CHECK(frame->file == "/w/model/net.py");
  CHECK(frame->line == 7);
  CHECK_FALSE(air::innermost_frame("no traceback here\n"));
  CHECK_FALSE(air::innermost_frame("  File \"x.py\", line abc\n"));
}

TEST_CASE("traceback: paths relative to the workspace", "[traceback]") {
  CHECK(air::relative_to("/w/repo/a/b.py", "/w/repo") == "a/b.py");
  CHECK(air::relative_to("/w/repo/a/b.py", "/w/repo/") == "a/b.py");
  CHECK(air::relative_to("/w/repository/b.py", "/w/repo") == "/w/repository/b.py");
  CHECK(air::relative_to("/w/repo/b.py", "") == "/w/repo/b.py");
}

TEST_CASE("traceback: the job's name comes from the spec or the target", "[traceback]") {
  air::LaunchSpec spec;
  spec.command.value = {"scripts/train.py", "--lr", "1"};
  CHECK(air::job_name(spec) == "train");
  spec.command.value = {"pkg.trainer"};
  CHECK(air::job_name(spec) == "pkg.trainer");
  spec.spec_path = "configs/nightly.yaml";
  CHECK(air::job_name(spec) == "nightly");
  spec.spec_path.clear();
  spec.command.value.clear();
  CHECK(air::job_name(spec) == "air-run");
}

TEST_CASE("traceback: torch 2.3+'s [rankN]: prefix is not part of a line", "[traceback]") {
  const std::string tb = "[rank1]: Traceback (most recent call last):\n"
                         "[rank1]:   File \"/w/train.py\", line 12, in <module>\n"
                         "[rank1]:     raise RuntimeError(\"boom\")\n"
                         "[rank1]: RuntimeError: boom\n"
                         "[rank1]:[W ProcessGroupGloo.cpp:12] Warning: shutting down\n";
  CHECK(air::exception_line(tb) == "RuntimeError: boom");
  const auto frame = air::innermost_frame(tb);
  REQUIRE(frame);
  CHECK(frame->file == "/w/train.py");
  CHECK(frame->line == 12);
  CHECK(air::exception_line("[rank12]:ValueError: x\n") == "ValueError: x");
  // Not a rank prefix: left as it is.
  CHECK(air::exception_line("[rankx]: ValueError: x\n") == "");
}
