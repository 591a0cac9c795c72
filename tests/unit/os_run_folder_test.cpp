// A run's log folder is its own: a run id used again gets the next folder,
// the nodes of one run share theirs.
#include "core/os/run_folder.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <filesystem>
#include <string>

TEST_CASE("run folders: a taken folder gives the next free one", "[run_folder]") {
  const air::test::TempDir dir;
  const std::string logs = dir.file("logs/exp1");
  auto first = air::claim_run_folder(logs, 0);
  REQUIRE(first.ok());
  CHECK(*first == logs);
  CHECK(std::filesystem::is_regular_file(logs + "/.air-run-node0"));
  // Another run with the same id, at the same time or later.
  auto second = air::claim_run_folder(logs, 0);
  REQUIRE(second.ok());
  CHECK(*second == logs + ".1");
  auto third = air::claim_run_folder(logs, 0);
  REQUIRE(third.ok());
  CHECK(*third == logs + ".2");
}

TEST_CASE("run folders: the nodes of one run share a folder", "[run_folder]") {
  const air::test::TempDir dir;
  const std::string logs = dir.file("exp1");
  auto node0 = air::claim_run_folder(logs, 0);
  auto node1 = air::claim_run_folder(logs, 1);
  REQUIRE(node0.ok());
  REQUIRE(node1.ok());
  CHECK(*node0 == logs);
  CHECK(*node1 == logs);
}

TEST_CASE("run folders: a path that cannot be made is an error naming it", "[run_folder]") {
  const air::test::TempDir dir;
  const std::string file = dir.write("plain", "x");
  auto claimed = air::claim_run_folder(file + "/exp1", 0);
  REQUIRE_FALSE(claimed.ok());
  CHECK(claimed.error().message.find(file) != std::string::npos);
}
