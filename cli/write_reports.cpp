#include "cli/write_reports.hpp"

#include "core/os/atomic_file.hpp"
#include "core/os/host.hpp"
#include "core/report/annotations.hpp"
#include "core/report/collect.hpp"
#include "core/report/junit.hpp"
#include "core/report/summary.hpp"
#include "core/report/text.hpp"
#include "core/run/console_style.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace air::cli {

namespace {

/// Writes one report file, creating its directory. A report that cannot be
/// written is an error of air-run itself: a green exit code must mean the
/// files a CI step reads exist.
bool write_report_file(const std::string& path, const std::string& content, const char* what) {
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) {
    if (auto made = make_directories(dir.string()); !made) {
      std::fputs(fmt::format("air-run: error: {} not written: {}\n", what, made.error().message).c_str(),
                 stderr);
      return false;
    }
  }
  if (auto written = write_file_atomically(path, content); !written) {
    std::fputs(fmt::format("air-run: error: {} not written: {}\n", what, written.error().message).c_str(),
               stderr);
    return false;
  }
  return true;
}

} // namespace

int report_run(const LaunchSpec& spec, const Hardware& hardware, const Selection& selection,
               const LaunchPlan& plan, const RunOutcome& outcome, const Environment& env,
               mlflow::Tracker* tracker) {
  int code = outcome.exit_code();
  RunReport report = collect_report(spec, hardware, selection, plan, outcome, code, host_name());
  if (tracker != nullptr) {
    report.mlflow = &tracker->info();
    tracker->finish(outcome, code, plan.node_rank == 0, [&report] { return summary_text(report); });
  }

  std::fflush(stdout);
  std::fputs(format_report(report, use_color(::isatty(STDERR_FILENO) == 1, env)).c_str(), stderr);
  if (tracker != nullptr) std::fputs(("air-run: " + tracker->report_line() + "\n").c_str(), stderr);
  bool written = true;
  const std::string summary = summary_text(report);
  if (!spec.summary_file.value.empty())
    written &= write_report_file(spec.summary_file.value, summary, "summary");
  if (!spec.junit_file.value.empty())
    written &= write_report_file(spec.junit_file.value, junit_xml(report), "JUnit report");
  if (github_actions_enabled(env)) {
    // GitHub reads workflow commands from both streams; keep stdout pure JSON under --json.
    std::FILE* to = spec.json.value ? stderr : stdout;
    for (const auto& line : github_annotations(report, env_or(env, "GITHUB_WORKSPACE")))
      std::fputs((line + "\n").c_str(), to);
    // The job's summary page: GitHub appends what each step adds to this file.
    if (const std::string page = env_or(env, "GITHUB_STEP_SUMMARY"); !page.empty()) {
      if (std::FILE* f = std::fopen(page.c_str(), "ae")) {
        std::fputs(github_step_summary(report).c_str(), f);
        std::fclose(f);
      } else {
        std::fputs(fmt::format("air-run: warning: GITHUB_STEP_SUMMARY {} not written\n", page).c_str(),
                   stderr);
      }
    }
  }
  if (spec.json.value) {
    std::fputs(summary.c_str(), stdout);
    if (summary.empty() || summary.back() != '\n') std::fputc('\n', stdout);
  }
  std::fflush(stdout);
  if (!written && code == 0) code = 125;
  return code;
}

} // namespace air::cli
