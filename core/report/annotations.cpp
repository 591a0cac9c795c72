#include "core/report/annotations.hpp"

#include "core/report/summary.hpp"

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

std::vector<std::string> github_annotations(const RunReport& report) {
  const RunOutcome& o = report.outcome;
  std::vector<std::string> lines;
  if (o.status == RunOutcome::Status::succeeded) return lines;
  for (std::size_t i = 0; i < o.ranks.size(); ++i) {
    const RankOutcome& r = o.ranks[i];
    if (!rank_failed(r)) continue;
    std::string message = "rank " + std::to_string(r.rank) + " " +
                          (r.spawn_error.empty() ? "failed with " : "") + describe_rank_end(r);
    if (i < report.errors.size() && report.errors[i]) {
      const RankError& e = *report.errors[i];
      if (e.source == RankError::Source::error_file) {
        message += ": " + (e.type.empty()      ? e.message
                           : e.message.empty() ? e.type
                                               : e.type + ": " + e.message);
      }
      std::string body = e.traceback;
      while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
      if (!body.empty()) message += "\n" + body;
    }
    lines.push_back("::error title=" + escape_workflow_property("air-run rank " + std::to_string(r.rank)) +
                    "::" + escape_workflow_data(message));
  }
  if (lines.empty()) {
    const std::string message = o.reason.empty() ? "run " + std::string(to_string(o.status)) : o.reason;
    lines.push_back("::error title=air-run::" +
                    escape_workflow_data(message + " (exit code " + std::to_string(report.exit_code) + ")"));
  }
  return lines;
}

} // namespace air
