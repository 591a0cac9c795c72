#include "core/report/annotations.hpp"

#include "core/base/text.hpp"
#include "core/report/bounded.hpp"
#include "core/report/summary.hpp"
#include "core/report/text.hpp"
#include "core/report/traceback.hpp"

#include <fmt/format.h>

namespace air {

bool github_actions_enabled(const Environment& env) { return env_or(env, "GITHUB_ACTIONS") == "true"; }

std::string escape_workflow_data(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '%':
      out += "%25";
      break;
    case '\r':
      out += "%0D";
      break;
    case '\n':
      out += "%0A";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string escape_workflow_property(std::string_view text) {
  std::string out;
  for (char c : escape_workflow_data(text)) {
    switch (c) {
    case ':':
      out += "%3A";
      break;
    case ',':
      out += "%2C";
      break;
    default:
      out += c;
    }
  }
  return out;
}

namespace {

/// `path` as a path from `cwd` when it is relative ("job.yaml" in "/ws/ci" ->
/// "/ws/ci/job.yaml"); unchanged when absolute or `cwd` is unknown.
std::string from_directory(const std::string& path, const std::string& cwd) {
  if (path.empty() || path.front() == '/' || cwd.empty()) return path;
  std::string_view rest = path;
  while (rest.substr(0, 2) == "./") rest.remove_prefix(2);
  std::string base = cwd;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return (base == "/" ? "" : base) + "/" + std::string(rest);
}

} // namespace

std::vector<std::string> github_annotations(const RunReport& report, const std::string& workspace,
                                            const std::string& cwd) {
  const RunOutcome& o = report.outcome;
  std::vector<std::string> lines;
  // A hang or a straggler is news even when the run went on to succeed.
  if (o.hang && o.status != RunOutcome::Status::hung)
    lines.push_back("::warning title=" + escape_workflow_property("air-run: no progress for a while") +
                    "::" + escape_workflow_data(o.hang->diagnosis.line));
  for (const Straggler& s : o.stragglers)
    if (lines.size() < k_annotations_per_kind) // GitHub shows no more a step
      lines.push_back(
          "::warning title=" + escape_workflow_property("air-run straggler: rank " + std::to_string(s.rank)) +
          "::" + escape_workflow_data(straggler_line(s)));
  if (o.status == RunOutcome::Status::succeeded) return lines;
  const std::size_t before_errors = lines.size();
  std::vector<int> unshown; // failed ranks past GitHub's 10 errors a step
  std::size_t failed = 0;
  for (const RankOutcome& r : o.ranks) failed += rank_failed(r) ? 1 : 0;
  for (std::size_t i = 0; i < o.ranks.size(); ++i) {
    const RankOutcome& r = o.ranks[i];
    if (!rank_failed(r)) continue;
    if (failed > k_annotations_per_kind && lines.size() - before_errors >= k_annotations_per_kind - 1) {
      unshown.push_back(r.rank);
      continue;
    }
    std::string message = "rank " + std::to_string(r.rank) + " " +
                          (r.spawn_error.empty() ? "failed with " : "") + describe_rank_end(r);
    std::string where; // "file=train.py,line=3,": the innermost frame, shown on the diff
    if (i < report.errors.size() && report.errors[i]) {
      const RankError& e = *report.errors[i];
      if (e.source == RankError::Source::error_file) {
        message += ": " + (e.type.empty()      ? e.message
                           : e.message.empty() ? e.type
                                               : e.type + ": " + e.message);
      } else if (const std::string exception = exception_line(e.traceback); !exception.empty()) {
        message += ": " + exception;
      }
      std::string body = e.traceback;
      while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
      if (!body.empty()) message += "\n" + body;
      if (const auto frame = innermost_frame(e.traceback)) {
        where = "file=" + escape_workflow_property(relative_to(frame->file, workspace)) +
                ",line=" + std::to_string(frame->line) + ",";
      }
    }
    lines.push_back("::error " + where +
                    "title=" + escape_workflow_property("air-run rank " + std::to_string(r.rank)) +
                    "::" + escape_workflow_data(bounded_text(message, k_annotation_message_bytes)));
  }
  if (!unshown.empty()) {
    std::string ranks;
    for (std::size_t i = 0; i < unshown.size() && i < 32; ++i)
      ranks += (i == 0 ? "" : ", ") + std::to_string(unshown[i]);
    if (unshown.size() > 32) ranks += ", ...";
    lines.push_back(
        "::error title=" + escape_workflow_property("air-run: more failed ranks") + "::" +
        escape_workflow_data(fmt::format("{} more ranks failed ({}); GitHub shows 10 errors a step: "
                                         "the step's log and the JUnit report have them all",
                                         unshown.size(), ranks)));
  }
  if (lines.size() == before_errors) {
    std::string message = o.reason.empty() ? "run " + std::string(to_string(o.status)) : o.reason;
    std::string where; // a spec error names its place: "job.yaml:2:1: unknown key ..."
    if (report.refusal != nullptr) {
      if (const auto place = message_place(report.refusal->message)) {
        // The spec path is as the user typed it, from air-run's directory;
        // without a workspace it stays so.
        const std::string file =
            workspace.empty() ? place->file : relative_to(from_directory(place->file, cwd), workspace);
        where = "file=" + escape_workflow_property(file) + ",line=" + std::to_string(place->line) + ",";
      }
    }
    if (o.status == RunOutcome::Status::hung && o.hang) message += ": " + o.hang->diagnosis.line;
    lines.push_back(
        "::error " + where + "title=" +
        escape_workflow_property(report.refusal != nullptr ? "air-run: launch refused" : "air-run") + "::" +
        escape_workflow_data(bounded_text(message, k_annotation_message_bytes) + " (exit code " +
                             std::to_string(report.exit_code) + ")"));
  }
  return lines;
}

std::optional<SourcePlace> message_place(std::string_view message) {
  // "<file>:<line>:<column>: ..." or "<file>:<line>: ...", as spec errors begin.
  const auto colon = message.find(':');
  if (colon == 0 || colon == std::string_view::npos ||
      message.substr(0, colon).find(' ') != std::string_view::npos)
    return std::nullopt;
  std::size_t end = colon + 1;
  while (end < message.size() && is_digit(message[end])) ++end;
  if (end == colon + 1 || end - colon > 10 || end >= message.size() || message[end] != ':')
    return std::nullopt;
  return SourcePlace{std::string(message.substr(0, colon)),
                     std::stoi(std::string(message.substr(colon + 1, end - colon - 1)))};
}

namespace {

/// A table cell: no line breaks, and a '|' would end the cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out;
}

} // namespace

std::string github_step_summary(const RunReport& report) {
  const RunOutcome& o = report.outcome;
  std::string out = "### air-run " + cell(job_name(report.spec)) + ": " +
                    std::string(status_words(o.status)) + " (exit code " + std::to_string(report.exit_code) +
                    ")\n\n";
  if (!o.reason.empty()) out += cell(bounded_head(o.reason, k_summary_cell_bytes)) + "\n\n";
  if (report.refusal != nullptr) return out + "Nothing was launched.\n";
  out += "| rank | status | time | error |\n|---:|---|---:|---|\n";
  for (std::size_t i = 0; i < o.ranks.size(); ++i) {
    const RankOutcome& r = o.ranks[i];
    // GitHub refuses a summary over 1 MiB whole: the rows that do not fit are counted, not shown.
    if (out.size() > k_step_summary_bytes - 2 * k_summary_cell_bytes - 1024) {
      out += "| ... | " + std::to_string(o.ranks.size() - i) +
             " more ranks: the JUnit report and the summary JSON have them | | |\n";
      break;
    }
    std::string status;
    if (rank_failed(r))
      status = (r.rank == o.root_cause_rank ? "failed (root cause): " : "failed: ") + describe_rank_end(r);
    else if (r.killed)
      status = "killed after the grace period";
    else if (r.stopped_by_air_run)
      status = "stopped by air-run";
    else if (r.status.kind == ExitStatus::Kind::not_exited)
      status = "not started";
    else
      status = "ok";
    std::string error;
    if (i < report.errors.size() && report.errors[i] && rank_failed(r)) {
      const RankError& e = *report.errors[i];
      error = e.source == RankError::Source::error_file ? (e.type.empty()      ? e.message
                                                           : e.message.empty() ? e.type
                                                                               : e.type + ": " + e.message)
                                                        : exception_line(e.traceback);
    }
    out += "| " + std::to_string(r.rank) + " | " + cell(status) + " | " + format_seconds(r.duration_s) +
           " | " + (error.empty() ? "" : "`" + cell(bounded_head(error, k_summary_cell_bytes)) + "`") +
           " |\n";
  }
  out += "\nrun `" + cell(report.plan.run_id) + "`, " + std::to_string(o.ranks.size()) +
         (o.ranks.size() == 1 ? " rank, " : " ranks, ") + format_seconds(o.duration_s) + "\n";
  return out;
}

} // namespace air
