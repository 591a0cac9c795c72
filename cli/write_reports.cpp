#include "cli/write_reports.hpp"

#include "core/os/atomic_file.hpp"
#include "core/os/host.hpp"
#include "core/report/annotations.hpp"
#include "core/report/collect.hpp"
#include "core/report/junit.hpp"
#include "core/report/summary.hpp"
#include "core/report/text.hpp"
#include "core/run/console_style.hpp"
#include "core/spec/path_template.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
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

/// Writes what a run's report goes to besides the terminal: the summary and
/// JUnit files, GitHub's annotations and step summary, the JSON on stdout.
/// Returns false when a file the spec asked for could not be written.
bool publish_reports(const RunReport& report, const LaunchSpec& spec, const Environment& env) {
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
  return written;
}

} // namespace

int report_run(const LaunchSpec& spec, const Hardware& hardware, const Selection& selection,
               const LaunchPlan& plan, const RunOutcome& outcome, const Environment& env,
               mlflow::Tracker* tracker, const PreparedEnv* python_env) {
  int code = outcome.exit_code();
  RunReport report = collect_report(spec, hardware, selection, plan, outcome, code, host_name());
  report.python_env = python_env;
  if (tracker != nullptr) {
    report.mlflow = &tracker->info();
    tracker->finish(outcome, code, plan.node_rank == 0, [&report] { return summary_text(report); });
  }

  std::fflush(stdout);
  std::fputs(format_report(report, use_color(::isatty(STDERR_FILENO) == 1, env)).c_str(), stderr);
  if (tracker != nullptr) std::fputs(("air-run: " + tracker->report_line() + "\n").c_str(), stderr);
  if (!publish_reports(report, spec, env) && code == 0) code = 125;
  return code;
}

void report_refused_launch(const LaunchFacts& facts, const Error& error, int exit_code,
                           const Environment& env) {
  if (!facts.spec) return;
  LaunchSpec spec = *facts.spec;
  const bool wanted = !spec.summary_file.value.empty() || !spec.junit_file.value.empty() || spec.json.value ||
                      github_actions_enabled(env);
  if (!wanted) return;
  LaunchPlan plan;
  plan.run_id = facts.run_id.empty() ? make_run_id() : facts.run_id;
  for (auto* path : {&spec.summary_file.value, &spec.junit_file.value}) {
    if (!check_placeholders(*path, {"run_id", "node_rank"}, "report path")) return; // the path is the error
    *path = fill_run_placeholders(*path, plan.run_id, facts.node_rank);
  }
  RunOutcome outcome;
  outcome.status = RunOutcome::Status::launch_failed;
  outcome.reason = error.message;
  outcome.started_at = outcome.ended_at = std::chrono::system_clock::now();
  const Hardware hardware = facts.hardware.value_or(Hardware{});
  const Selection selection;
  RunReport report = collect_report(spec, hardware, selection, plan, outcome, exit_code, host_name());
  report.refusal = &error;
  report.spec_resolved = facts.spec_resolved;
  report.hardware_probed = facts.hardware.has_value();
  report.python_env = facts.python_env ? &*facts.python_env : nullptr;
  publish_reports(report, spec, env);
}

} // namespace air::cli
