// Placeholders in --log-dir, --summary and --junit paths.
#include "core/spec/path_template.hpp"
#include "tests/unit/catch.hpp"

TEST_CASE("path template: known placeholders pass, others are usage errors", "[path_template]") {
  CHECK(air::check_placeholders("logs/{run_id}/{rank}", {"run_id", "node_rank", "rank"}, "log_dir").ok());
  CHECK(air::check_placeholders("plain/path", {"run_id"}, "log_dir").ok());
  const auto unknown =
      air::check_placeholders("out/{runid}.json", {"run_id", "node_rank"}, "summary_file (--summary)");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().kind == air::ErrorKind::usage);
  CHECK(unknown.error().message ==
        "summary_file (--summary): unknown placeholder {runid} in \"out/{runid}.json\"; "
        "known here: {run_id}, {node_rank}");
  // {rank} has no meaning for a file written once per node.
  CHECK_FALSE(air::check_placeholders("s-{rank}.json", {"run_id", "node_rank"}, "summary_file").ok());
  const auto unclosed = air::check_placeholders("logs/{run_id", {"run_id"}, "log_dir");
  REQUIRE_FALSE(unclosed.ok());
  CHECK(unclosed.error().message == "log_dir: unclosed '{' in \"logs/{run_id\"");
}

TEST_CASE("path template: substitution replaces every occurrence", "[path_template]") {
  CHECK(air::substitute_placeholder("a/{run_id}/b-{run_id}", "run_id", "20261201-1") ==
        "a/20261201-1/b-20261201-1");
  CHECK(air::substitute_placeholder("a/{rank}", "run_id", "x") == "a/{rank}");
  CHECK(air::fill_run_placeholders("logs/{run_id}/n{node_rank}/{rank}", "r7", 2) == "logs/r7/n2/{rank}");
}

TEST_CASE("a log folder gets a per-run subfolder unless it names {run_id}", "[path_template]") {
  CHECK(air::with_run_folder("") == "");
  CHECK(air::with_run_folder("logs") == "logs/{run_id}");
  CHECK(air::with_run_folder("logs/") == "logs/{run_id}");
  CHECK(air::with_run_folder("/") == "/{run_id}");
  CHECK(air::with_run_folder("logs/{rank}") == "logs/{run_id}/{rank}");
  CHECK(air::with_run_folder("{rank}") == "{run_id}/{rank}");
  CHECK(air::with_run_folder("out/r{rank}/x") == "out/{run_id}/r{rank}/x");
  CHECK(air::with_run_folder("logs/{run_id}") == "logs/{run_id}");
  CHECK(air::with_run_folder("logs/run-{run_id}/{rank}") == "logs/run-{run_id}/{rank}");
}
