// core/base/speaker: air-run's own console lines name their node in a job of several.
#include "core/base/speaker.hpp"
#include "tests/unit/catch.hpp"

#include <string>

TEST_CASE("name_node leaves one node's lines byte for byte", "[speaker]") {
  const std::string text = "air-run: run r1 succeeded\n[rank0]: air-run: hello\nair-run preflight: 2 GPUs\n";
  CHECK(air::name_node(text, 0, 1) == text);
  CHECK(air::air_run_name(0, 1) == "air-run");
}

TEST_CASE("name_node names the node on each of air-run's lines, and on no other", "[speaker]") {
  CHECK(air::air_run_name(1, 2) == "air-run (node 1)");
  CHECK(air::name_node("air-run: run r1 failed after 1.0s (exit code 3): rank 2 exited 3\n"
                       "  root cause: rank 2 (local_rank 0, pid 7): exit code 3\n"
                       "air-run: warning: 1 line of rank output not shown\n"
                       "[rank2]: air-run: a rank's own words\n"
                       "air-run preflight: 2 GPUs\n"
                       "air-runner: not ours\n"
                       "air-run",
                       1, 2) == "air-run (node 1): run r1 failed after 1.0s (exit code 3): rank 2 exited 3\n"
                                "  root cause: rank 2 (local_rank 0, pid 7): exit code 3\n"
                                "air-run (node 1): warning: 1 line of rank output not shown\n"
                                "[rank2]: air-run: a rank's own words\n"
                                "air-run (node 1) preflight: 2 GPUs\n"
                                "air-runner: not ours\n"
                                "air-run");
  // A line without its newline yet (a build's progress) is named too.
  CHECK(air::name_node("air-run: building environment 3f2a ... ", 0, 3) ==
        "air-run (node 0): building environment 3f2a ... ");
}

TEST_CASE("name_node names a line once, however often it passes", "[speaker]") {
  const std::string once = air::name_node("air-run: stopping 2 ranks (SIGTERM)\n", 1, 2);
  CHECK(once == "air-run (node 1): stopping 2 ranks (SIGTERM)\n");
  CHECK(air::name_node(once, 1, 2) == once);
}

TEST_CASE("said() speaks for the node set last", "[speaker]") {
  air::set_console_node(0, 1);
  CHECK(air::said("air-run: x\n") == "air-run: x\n");
  CHECK(air::air_run_says() == "air-run: ");
  air::set_console_node(2, 4);
  CHECK(air::said("air-run: x\n") == "air-run (node 2): x\n");
  CHECK(air::air_run_says() == "air-run (node 2): ");
  air::set_console_node(0, 1); // the other tests' one node
}
