// A rank's tail as reports show it: a progress bar's last state, and a
// traceback header glued after it on a line of its own.
#include "core/report/collect.hpp"
#include "core/report/junit.hpp"
#include "core/report/shown_tail.hpp"
#include "core/report/summary.hpp"
#include "core/report/text.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <deque>
#include <string>
#include <vector>

namespace {

using Lines = std::vector<std::string>;

/// A tqdm-style bar on stderr, no newline, then Python's traceback: off a
/// terminal the header lands on the bar's line. Each tail line is raw, as a
/// supervisor that keeps the '\r's would store it.
std::deque<std::string> bar_then_raise() {
  return {"epoch 0", "\r  0%|          | 0/10\r 50%|#####     | 5/10Traceback (most recent call last):",
          "  File \"/w/train.py\", line 12, in <module>", "    raise RuntimeError(\"boom\")",
          "RuntimeError: boom"};
}

} // namespace

TEST_CASE("shown_lines: a bar's last state, and a glued traceback header on its own line", "[traceback]") {
  CHECK(air::shown_lines("plain line") == Lines{"plain line"});
  CHECK(air::shown_lines("  5%|#  |\r 50%|##### |") == Lines{" 50%|##### |"});
  CHECK(air::shown_lines("\r 50%|#####|Traceback (most recent call last):") ==
        Lines{" 50%|#####|", "Traceback (most recent call last):"});
  // torch 2.3+'s prefix stays with the header it belongs to.
  CHECK(air::shown_lines("\r 50%|#####|[rank0]: Traceback (most recent call last):") ==
        Lines{" 50%|#####|", "[rank0]: Traceback (most recent call last):"});
  CHECK(air::shown_lines("[rank0]: Traceback (most recent call last):") ==
        Lines{"[rank0]: Traceback (most recent call last):"});
  CHECK(air::shown_lines("Traceback (most recent call last):") ==
        Lines{"Traceback (most recent call last):"});
  CHECK(air::shown_lines("") == Lines{""});
  CHECK(air::shown_last_line({"a", "b\rc"}) == "c");
  CHECK(air::shown_last_line({}).empty());
}

TEST_CASE("a rank that drew a progress bar then raised: its error names the exception", "[results]") {
  air::RankOutcome rank = air::test::make_rank(1, 12, air::ExitStatus::exited_with(1), 1);
  rank.tail = bar_then_raise();
  const auto e = air::rank_error(rank, std::nullopt);
  REQUIRE(e.has_value());
  CHECK(e->source == air::RankError::Source::output_tail);
  CHECK(e->type == "RuntimeError");
  CHECK(e->message == "exit code 1");
  CHECK(e->traceback == "epoch 0\n"
                        " 50%|#####     | 5/10\n"
                        "Traceback (most recent call last):\n"
                        "  File \"/w/train.py\", line 12, in <module>\n"
                        "    raise RuntimeError(\"boom\")\n"
                        "RuntimeError: boom");
}

TEST_CASE("reports show the bar's last state and the exception, not every '\\r'", "[summary]") {
  air::test::SampleRun run;
  run.outcome.ranks[1].tail = bar_then_raise();
  run.outcome.ranks[2].tail = {"step 7", "\r 10%|#  |\r 20%|## |"};
  air::RunReport report = air::test::sample_report(run);
  report.errors[1] = air::rank_error(run.outcome.ranks[1], std::nullopt);
  const auto summary = air::summary_json(report);
  CHECK(summary["ranks"][1]["error"]["type"] == "RuntimeError");
  CHECK(summary["ranks"][1]["last_line"] == "RuntimeError: boom");
  CHECK(summary["ranks"][2]["last_line"] == " 20%|## |");

  const std::string xml = air::junit_xml(report);
  CHECK(xml.find(R"x(<failure message="RuntimeError: boom (exit code 3)" type="RuntimeError">)x") !=
        std::string::npos);
  CHECK(xml.find("<system-out>epoch 0\n 50%|#####     | 5/10\nTraceback (most recent call last):\n") !=
        std::string::npos);

  const std::string text = air::format_report(report);
  CHECK(text.find("      epoch 0\n       50%|#####     | 5/10\n      Traceback (most recent call last):\n") !=
        std::string::npos);
}

TEST_CASE("torch 2.3+'s [rankN]: prefix: the exception and its frame are still found", "[traceback]") {
  air::RankOutcome rank = air::test::make_rank(0, 12, air::ExitStatus::exited_with(1), 1);
  rank.tail = {
      "[rank0]: Traceback (most recent call last):", "[rank0]:   File \"/w/train.py\", line 12, in <module>",
      "[rank0]:     raise RuntimeError(\"boom\")", "[rank0]: RuntimeError: boom"};
  const auto e = air::rank_error(rank, std::nullopt);
  REQUIRE(e.has_value());
  CHECK(e->type == "RuntimeError");
}
