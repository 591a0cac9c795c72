#include "core/mlflow/rank_wait.hpp"
#include "core/run/stacks.hpp"
#include "core/warm/warm_start.hpp"
#include "tests/unit/catch.hpp"

#include <string>

// The shim as the parts built into the binary assemble it (core/run/stacks.cpp):
// the order the ranks run it in, and nothing of the modules' lint-only headers.

namespace {

/// Where `needle` is in `text`; fails the test when it is not there.
std::size_t at(const std::string& text, const std::string& needle) {
  const auto pos = text.find(needle);
  INFO(needle);
  REQUIRE(pos != std::string::npos);
  return pos;
}

constexpr const char* k_marker = "# ---- air-run embeds this file from the next line on ----";

} // namespace

TEST_CASE("the shim runs stacks, progress, the parts handed in, then the shadowed sitecustomize",
          "[stacks]") {
  const std::string shim = air::stack_shim_source({air::mlflow_rank_wait_part()});
  CHECK(shim.rfind("# Written by air-run for one run.", 0) == 0); // the stacks part opens it
  // Definitions come before the start, in the parts' order.
  CHECK(at(shim, "def _air_run_arm():") < at(shim, "def _air_run_record_errors():"));
  CHECK(at(shim, "def _air_run_record_errors():") < at(shim, "def _air_run_store_linger("));
  CHECK(at(shim, "def _air_run_store_linger(") < at(shim, "_AIR_SLOT_STEPS = 1\n"));
  CHECK(at(shim, "_AIR_SLOT_STEPS = 1\n") < at(shim, "class _AirRunProgress:"));
  CHECK(at(shim, "class _AirRunProgress:") < at(shim, "class _AirRunImportHook:"));
  CHECK(at(shim, "class _AirRunImportHook:") < at(shim, "def _air_run_mlflow_run():"));
  CHECK(at(shim, "def _air_run_mlflow_run():") < at(shim, "def _air_run_rank_start():"));
  // The start, in the order the ranks have always run it.
  const std::string start =
      "sys._air_run_rank_start = _air_run_rank_start\n_air_run_record_errors()\n_air_run_store_linger()\n"
      "_air_run_add_package()\n"
      "_air_run_arm()\n"
      "_air_run_progress()\n_air_run_mlflow_run()\n_air_run_chain()\n";
  CHECK(shim.size() >= start.size());
  CHECK(shim.compare(shim.size() - start.size(), start.size(), start) == 0);
  // No module's header (docstring, lint-only imports) nor any marker is in it.
  CHECK(shim.find(k_marker) == std::string::npos);
  CHECK(shim.find("air-run: the later parts start here") == std::string::npos);
  CHECK(shim.find("from air_run_") == std::string::npos);
  CHECK(shim.find("\"\"\"The shim's") == std::string::npos);
}

TEST_CASE("the shim without parts handed in starts nothing of theirs", "[stacks]") {
  const std::string shim = air::stack_shim_source();
  CHECK(shim.find("_air_run_mlflow") == std::string::npos);
  CHECK(shim.find("_air_run_progress()\n_air_run_chain()\n") != std::string::npos);
  CHECK(shim.find("air-run: the later parts start here") == std::string::npos);
}

TEST_CASE("the warm start's program is its module after the marker", "[stacks]") {
  const std::string program = air::warm_start_program();
  CHECK(program.rfind("# Written by air-run for one run (--preload).", 0) == 0);
  CHECK(program.find(k_marker) == std::string::npos);
  CHECK(program.find("AIR_RUN_FAILED_") == std::string::npos); // every placeholder filled in
  CHECK(program.find("\n    _run(request)\n") != std::string::npos);
}
