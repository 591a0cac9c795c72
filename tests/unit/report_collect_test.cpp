// collect_report: reading what every rank left, and choosing each rank's error.
#include "core/os/atomic_file.hpp"
#include "core/report/collect.hpp"
#include "core/report/rank_result.hpp"
#include "core/run/error_file.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

using air::RankResult;
using air::test::TempDir;

TEST_CASE("collect_report reads every rank's files", "[results]") {
  TempDir dir;
  air::test::SampleRun run;
  for (auto& rp : run.plan.ranks) {
    rp.result_file = dir.file("result-" + std::to_string(rp.rank) + ".json");
    rp.error_file = dir.file("error-" + std::to_string(rp.rank) + ".json");
  }
  dir.write("result-0.json", R"({"loss": 0.5})"); // a stopped rank keeps its result
  dir.write("result-2.json", "{oops");
  dir.write("error-1.json", air::test::k_record_error_file);
  const air::RunReport report =
      air::collect_report(run.spec, run.hardware, run.selection, run.plan, run.outcome, 3, "node-3");
  CHECK(report.host == "node-3");
  CHECK(report.exit_code == 3);
  REQUIRE(report.results.size() == 4);
  REQUIRE(report.errors.size() == 4);
  CHECK(report.results[0].state == RankResult::State::ok);
  CHECK(report.results[0].value.dump() == R"({"loss":0.5})");
  CHECK(report.results[1].state == RankResult::State::missing);
  CHECK(report.results[2].state == RankResult::State::invalid);
  CHECK(report.results[3].state == RankResult::State::missing);

  CHECK_FALSE(report.errors[0].has_value()); // stopped, no error file
  REQUIRE(report.errors[1].has_value());
  CHECK(report.errors[1]->source == air::RankError::Source::error_file);
  CHECK(report.errors[1]->type == "RuntimeError");
  CHECK(report.errors[1]->message == "boom");
  CHECK(report.errors[1]->timestamp == 1712484803);
  REQUIRE(report.errors[2].has_value()); // failed without an error file: output tail
  CHECK(report.errors[2]->source == air::RankError::Source::output_tail);
  CHECK(report.errors[2]->type.empty());
  CHECK(report.errors[2]->message == "signal 11 (SIGSEGV, core dumped)");
  CHECK(report.errors[2]->traceback == "step 7\nFatal Python error: Segmentation fault");
  CHECK_FALSE(report.errors[3].has_value());
}

TEST_CASE("rank_error choices", "[results]") {
  using air::ExitStatus;
  air::RankOutcome ok = air::test::make_rank(0, 10, ExitStatus::exited_with(0), 1);
  CHECK_FALSE(air::rank_error(ok, std::nullopt).has_value());
  CHECK_FALSE(air::rank_failed(ok));

  air::RankOutcome spawn = air::test::make_rank(1, -1, ExitStatus::exited_with(127), 0);
  spawn.spawn_error = "execve train: No such file or directory";
  CHECK(air::rank_failed(spawn));
  const auto e = air::rank_error(spawn, std::nullopt);
  REQUIRE(e.has_value());
  CHECK(e->source == air::RankError::Source::spawn);
  CHECK(e->message == "execve train: No such file or directory");
  CHECK(air::describe_rank_end(spawn) == "could not be started: execve train: No such file or directory");

  air::RankOutcome oom = air::test::make_rank(2, 12, ExitStatus::killed_by(9), 1);
  oom.oom_killed = true;
  oom.tail = {"a", "b"};
  const auto o = air::rank_error(oom, std::nullopt);
  REQUIRE(o.has_value());
  CHECK(o->message == "signal 9 (SIGKILL), killed by the OOM killer");
  CHECK(o->traceback == "a\nb");

  air::RankOutcome never = air::test::make_rank(3, -1, ExitStatus{}, 0);
  CHECK_FALSE(air::rank_failed(never));

  air::ErrorFileRecord bad = air::parse_error_file("garbage");
  const auto m = air::rank_error(oom, bad);
  REQUIRE(m.has_value());
  CHECK(m->source == air::RankError::Source::error_file);
  CHECK(m->message.rfind("unusable TORCHELASTIC_ERROR_FILE: not JSON: ", 0) == 0);
  CHECK(m->traceback == "garbage");
}

TEST_CASE("time formatting", "[results]") {
  using namespace std::chrono;
  CHECK(air::format_utc(system_clock::time_point(milliseconds(1775556804123LL))) ==
        "2026-04-07T10:13:24.123Z");
  CHECK(air::format_utc(system_clock::time_point(milliseconds(0))) == "1970-01-01T00:00:00.000Z");
}

TEST_CASE("find_rank_plan finds a node's rank by its global number, in any order", "[results]") {
  air::LaunchPlan plan;
  for (int rank : {8, 9, 10, 11}) {
    air::RankPlan r;
    r.rank = rank;
    r.result_file = "r" + std::to_string(rank);
    plan.ranks.push_back(r);
  }
  REQUIRE(air::find_rank_plan(plan, 10) != nullptr);
  CHECK(air::find_rank_plan(plan, 10)->result_file == "r10");
  CHECK(air::find_rank_plan(plan, 8)->result_file == "r8");
  CHECK(air::find_rank_plan(plan, 3) == nullptr);
  CHECK(air::find_rank_plan(plan, 12) == nullptr);
  // Out of order (a plan built by hand): found all the same.
  std::swap(plan.ranks[0], plan.ranks[3]);
  CHECK(air::find_rank_plan(plan, 11)->result_file == "r11");
  CHECK(air::find_rank_plan(plan, 8)->result_file == "r8");
  CHECK(air::find_rank_plan(air::LaunchPlan{}, 0) == nullptr);
}
