// What air-run picks out of a rank's output: exception line, innermost frame, job name.
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

TEST_CASE("traceback: the innermost frame is the program's own, not a library's", "[traceback]") {
  // A Trainer callback that raises, called from transformers and torch.
  const std::string tb =
      "Traceback (most recent call last):\n"
      "  File \"/w/train.py\", line 60, in <module>\n"
      "  File \"/usr/lib/python3/dist-packages/transformers/trainer.py\", line 2200, in train\n"
      "  File \"/w/callbacks.py\", line 27, in on_step_end\n"
      "  File \"/opt/venv/lib/python3.12/site-packages/torch/nn/module.py\", line 9, in f\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 975, in run\n"
      "RuntimeError: injected failure at step 8\n";
  const auto frame = air::innermost_frame(tb);
  REQUIRE(frame);
  CHECK(frame->file == "/w/callbacks.py");
  CHECK(frame->line == 27);
  // Every frame a library's: the innermost of all.
  const auto lib = air::innermost_frame("  File \"/x/site-packages/a.py\", line 1, in f\n"
                                        "  File \"/x/site-packages/b.py\", line 2, in g\n");
  REQUIRE(lib);
  CHECK(lib->file == "/x/site-packages/b.py");
  // A chained exception: the program's frame of the last traceback, never
  // one of the cause's above its header.
  const auto chained =
      air::innermost_frame("Traceback (most recent call last):\n"
                           "  File \"/w/train.py\", line 5, in <module>\n"
                           "KeyError: 'x'\n\nDuring handling of the above exception, another "
                           "exception occurred:\n\nTraceback (most recent call last):\n"
                           "  File \"/x/site-packages/b.py\", line 2, in g\n"
                           "ValueError: y\n");
  REQUIRE(chained);
  CHECK(chained->file == "/x/site-packages/b.py");
}

TEST_CASE("traceback: the place is never air-run's shim nor the air package", "[traceback]") {
  // Every failed collective went through the shim's timing wrapper: the
  // place was "sitecustomize.py:304", a file deleted when the run ends.
  const auto collective = air::innermost_frame(
      "Traceback (most recent call last):\n"
      "  File \"/w/uneven2.py\", line 6, in <module>\n"
      "  File \"/tmp/air-run-abc/pyshim/sitecustomize.py\", line 304, in timed\n"
      "  File \"/v/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py\", line 1536, in "
      "all_reduce\n"
      "RuntimeError: Connection closed by peer\n");
  REQUIRE(collective);
  CHECK(collective->file == "/w/uneven2.py");
  CHECK(collective->line == 6);
  // air.data run from a checkout raises for the caller's line.
  const auto data =
      air::innermost_frame("Traceback (most recent call last):\n"
                           "  File \"/w/train.py\", line 41, in <module>\n"
                           "  File \"/src/air-run/python/air/data/_checkpoint.py\", line 54, in save\n"
                           "ValueError: step must be >= 0\n");
  REQUIRE(data);
  CHECK(data->file == "/w/train.py");
  CHECK(data->line == 41);
  // Only the shim and torch: torch's frame, never the shim's.
  const auto only =
      air::innermost_frame("  File \"/x/site-packages/torch/a.py\", line 1, in f\n"
                           "  File \"/tmp/air-run-abc/pyshim/air_run_shim.py\", line 9, in g\n");
  REQUIRE(only);
  CHECK(only->file == "/x/site-packages/torch/a.py");
  CHECK(air::is_library_file("/tmp/air-run-1/air_run_warm.py"));
  CHECK(air::is_library_file("/opt/air/python/air/_launch.py"));
  CHECK_FALSE(air::is_library_file("/w/air_experiments/train.py"));
}

TEST_CASE("traceback: which files are a library's", "[traceback]") {
  CHECK(air::is_library_file("/usr/lib/python3/dist-packages/torch/x.py"));
  CHECK(air::is_library_file("/v/lib/python3.12/site-packages/lightning/a.py"));
  CHECK(air::is_library_file("/usr/lib/python3.11/runpy.py"));
  CHECK(air::is_library_file("/usr/local/lib/python3.13/threading.py"));
  CHECK_FALSE(air::is_library_file("/home/me/train.py"));
  CHECK_FALSE(air::is_library_file("/home/me/lib/python3rd/train.py"));
  CHECK_FALSE(air::is_library_file("/srv/lib/python3.11x/train.py"));
}

TEST_CASE("traceback: a rank's own torch prefix is taken off once", "[traceback]") {
  CHECK(air::without_own_rank_prefix("[rank1]: Traceback (most recent call last):", 1) ==
        "Traceback (most recent call last):");
  CHECK(air::without_own_rank_prefix("[rank1]:", 1) == "");
  CHECK(air::without_own_rank_prefix("[rank1]: [rank1]: x", 1) == "[rank1]: x");
  // Another rank's prefix, or none, stays.
  CHECK(air::without_own_rank_prefix("[rank12]: x", 1) == "[rank12]: x");
  CHECK(air::without_own_rank_prefix("[rank1]: x", 12) == "[rank1]: x");
  CHECK(air::without_own_rank_prefix("plain", 0) == "plain");
}
