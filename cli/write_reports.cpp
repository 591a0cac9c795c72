#include "cli/write_reports.hpp"

#include "core/base/phase_clock.hpp"
#include "core/base/speaker.hpp"
#include "core/os/host.hpp"
#include "core/os/output_file.hpp"
#include "core/pyenv/cache.hpp"
#include "core/report/annotations.hpp"
#include "core/report/collect.hpp"
#include "core/report/html_page.hpp"
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
#include <optional>

namespace air::cli {

namespace {

/// air-run's working directory, "" when unknown: the spec path in a spec
/// error is relative to it.
std::string working_directory() {
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec);
  return ec ? std::string() : cwd.string();
}

/// Says on stderr that a report was not written; the caller makes it exit 125.
bool report_not_written(const char* what, const Error& error) {
  const std::string line = fmt::format("air-run: error: {} not written: {}\n", what, error.message);
  (void)write_to_fd(STDERR_FILENO, said(line), "stderr");
  return false;
}

/// Writes one report file, creating its directory. A report that cannot be
/// written is an error of air-run itself: a green exit code must mean the
/// files a CI step reads exist. Devices, FIFOs and terminals are written in
/// place, never replaced (core/os/output_file.hpp).
bool write_report_file(const std::string& path, const std::string& content, const char* what,
                       bool durable = true) {
  const OutputTarget target = output_target(path);
  const auto dir = std::filesystem::path(target.path).parent_path();
  if (target.kind == OutputTarget::Kind::replace && !dir.empty()) {
    if (auto made = make_directories(dir.string()); !made) return report_not_written(what, made.error());
  }
  if (auto written = write_output_file(path, content, durable); !written)
    return report_not_written(what, written.error());
  return true;
}

/// Writes a report to air-run's stdout or stderr, every byte checked (a full
/// device or a closed pipe is an error, never SIGPIPE).
bool write_report_stream(int fd, const std::string& content, const char* what) {
  if (auto written = write_to_fd(fd, content, fd == STDOUT_FILENO ? "stdout" : "stderr"); !written)
    return report_not_written(what, written.error());
  return true;
}

/// The step summary's line about the HTML page: GitHub shows no local file,
/// so it says where the page lies (the artifact to upload), with the run's
/// page on GitHub when the workflow's variables name it.
std::string html_step_summary_note(const std::string& path, const Environment& env) {
  std::string note = fmt::format("\nThe run as a picture: `{}` (one self-contained HTML page; upload it with "
                                 "actions/upload-artifact to open it from the run's page",
                                 path);
  const std::string server = env_or(env, "GITHUB_SERVER_URL"), repo = env_or(env, "GITHUB_REPOSITORY"),
                    run = env_or(env, "GITHUB_RUN_ID");
  if (!server.empty() && !repo.empty() && !run.empty())
    note += fmt::format(": [artifacts]({}/{}/actions/runs/{}#artifacts)", server, repo, run);
  return note + ").\n";
}

/// Writes what a run's report goes to besides the terminal: the summary and
/// JUnit files, GitHub's annotations and step summary, the JSON on stdout.
/// Returns false when any of them could not be written.
bool publish_reports(const RunReport& report, const LaunchSpec& spec, const Environment& env) {
  bool written = true;
  // Built only for a reader: a run that asks for no summary, page or JSON
  // ends without (a third of a millisecond of an 8-rank launch).
  nlohmann::ordered_json document;
  std::string summary;
  if (!spec.summary_file.value.empty() || !spec.html_file.value.empty() || spec.json.value) {
    document = summary_json(report);
    // replace: rank output may hold invalid UTF-8, which dump() would throw on.
    summary = document.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }
  if (!spec.summary_file.value.empty())
    written &= write_report_file(spec.summary_file.value, summary, "summary");
  phases::mark("summary");
  // The run as a picture, drawn from the summary alone, as `air-run report` draws it later.
  if (!spec.html_file.value.empty()) {
    // Not fsync'ed: the summary is, and the page is drawn again from it
    // (`air-run report`); two fsyncs would cost the run's end more than drawing it.
    written &= write_report_file(spec.html_file.value, html_page_of({&document}), "HTML page", false);
    phases::mark("html");
  }
  if (!spec.junit_file.value.empty())
    written &= write_report_file(spec.junit_file.value, junit_xml(report), "JUnit report");
  std::fflush(stdout); // what went through stdio comes first
  std::fflush(stderr);
  if (github_actions_enabled(env)) {
    // GitHub reads workflow commands from both streams; keep stdout pure JSON under --json.
    std::string commands;
    for (const auto& line : github_annotations(report, env_or(env, "GITHUB_WORKSPACE"), working_directory()))
      commands += line + "\n";
    if (!commands.empty())
      written &= write_report_stream(spec.json.value ? STDERR_FILENO : STDOUT_FILENO, commands,
                                     "GitHub annotations");
    // The job's summary page: GitHub appends what each step adds to this file.
    if (const std::string page = env_or(env, "GITHUB_STEP_SUMMARY"); !page.empty()) {
      std::string text = github_step_summary(report);
      if (!spec.html_file.value.empty()) text += html_step_summary_note(spec.html_file.value, env);
      if (auto appended = append_to_file(page, text); !appended)
        written = report_not_written("GITHUB_STEP_SUMMARY", appended.error());
    }
  }
  if (spec.json.value) {
    std::string json = summary;
    if (json.empty() || json.back() != '\n') json += '\n';
    written &= write_report_stream(STDOUT_FILENO, json, "JSON summary (--json)");
  }
  return written;
}

} // namespace

int report_run(const LaunchSpec& spec, const Hardware& hardware, const Selection& selection,
               const LaunchPlan& plan, const RunOutcome& outcome, const Environment& env,
               mlflow::Tracker* tracker, const PreparedEnv* python_env) {
  int code = outcome.exit_code();
  RunReport report = collect_report(spec, hardware, selection, plan, outcome, code, host_name());
  report.python_env = python_env;
  report.describe_python = [&spec, &env] { return describe_interpreter(spec.python.value, env); };
  if (tracker != nullptr) {
    report.mlflow = &tracker->info();
    // The page in the run is drawn from the summary uploaded beside it: one
    // summary_json for both (the page on disk is drawn from the final one).
    // The REST store draws it on its upload's thread: `uploaded` is set
    // before, and read only, until finish() returns.
    std::optional<nlohmann::ordered_json> uploaded;
    tracker->finish(
        outcome, code, plan.node_rank == 0,
        [&report, &uploaded] {
          uploaded = summary_json(report);
          return uploaded->dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
        },
        [&uploaded] { return uploaded ? html_page_of({&*uploaded}) : std::string(); });
  }

  // The human report goes to stderr whole (a rank's bytes cannot cut it short).
  // stderr is where air-run's own errors go, so one that cannot be written is
  // not made an exit code: there would be nowhere to say why.
  std::string text = format_report(report, use_color(::isatty(STDERR_FILENO) == 1, env));
  if (tracker != nullptr) text += said("air-run: " + tracker->report_line() + "\n");
  std::fflush(stdout);
  std::fflush(stderr);
  (void)write_to_fd(STDERR_FILENO, text, "stderr");
  if (!publish_reports(report, spec, env) && code == 0) code = 125;
  return code;
}

void report_refused_launch(const LaunchFacts& facts, const Error& error, int exit_code,
                           const Environment& env) {
  if (!facts.spec) return;
  LaunchSpec spec = *facts.spec;
  const bool wanted = !spec.summary_file.value.empty() || !spec.junit_file.value.empty() ||
                      !spec.html_file.value.empty() || spec.json.value || github_actions_enabled(env);
  if (!wanted) return;
  LaunchPlan plan;
  plan.run_id = facts.run_id.empty() ? make_run_id() : facts.run_id;
  for (auto* path : {&spec.summary_file.value, &spec.junit_file.value, &spec.html_file.value}) {
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
