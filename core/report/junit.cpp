#include "core/report/junit.hpp"

#include "core/report/bounded.hpp"
#include "core/report/shown_tail.hpp"
#include "core/report/summary.hpp"
#include "core/report/traceback.hpp"

#include <fmt/format.h>

#include <ctime>

namespace air {
namespace {

constexpr std::string_view k_replacement = "\xEF\xBF\xBD"; // U+FFFD

// Decodes one UTF-8 sequence at text[i]; returns the code point and advances
// i, or returns -1 (and advances one byte) for an invalid sequence.
long decode_utf8(std::string_view text, std::size_t& i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  std::size_t len = 0;
  long cp = 0;
  long min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    ++i;
    return -1;
  }
  if (i + len > text.size()) {
    ++i;
    return -1;
  }
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return -1;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
    ++i;
    return -1;
  }
  i += len;
  return cp;
}

bool xml_allowed(long cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
         (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

std::string attr(std::string_view name, std::string_view value) {
  return " " + std::string(name) + "=\"" + xml_escape(value, true) + "\"";
}

std::string seconds3(double s) {
  if (!(s >= 0)) s = 0;
  return fmt::format("{:.3f}", s);
}

// Ant's format: UTC here, no zone suffix (strict JUnit schemas reject one).
std::string ant_timestamp(std::chrono::system_clock::time_point t) {
  const std::string iso = format_utc(t); // 2026-04-07T10:13:24.123Z
  return iso.substr(0, 19);
}

/// The tail as reports show it (shown_tail.hpp), each line ended.
std::string join_tail(const RankOutcome& r) {
  std::string out;
  for (const std::string& line : shown_tail(r.tail)) {
    out += line;
    out += '\n';
  }
  return out;
}

std::string failure_type(const RankOutcome& r, const std::optional<RankError>& e) {
  if (e && !e->type.empty()) return e->type;
  if (r.oom_killed) return "oom_killed";
  if (r.status.kind == ExitStatus::Kind::signaled) return signal_name(r.status.signal);
  return "exit_code";
}

} // namespace

std::string xml_escape(std::string_view text, bool attribute) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    // ANSI CSI sequences (colours) carry no meaning in a report: drop them.
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      std::size_t j = i + 2;
      while (j < text.size() && static_cast<unsigned char>(text[j]) >= 0x20 &&
             static_cast<unsigned char>(text[j]) <= 0x3F) {
        ++j;
      }
      if (j < text.size() && static_cast<unsigned char>(text[j]) >= 0x40 &&
          static_cast<unsigned char>(text[j]) <= 0x7E) {
        i = j + 1;
        continue;
      }
    }
    const std::size_t start = i;
    const long cp = decode_utf8(text, i);
    if (cp < 0 || !xml_allowed(cp)) {
      out += k_replacement;
      continue;
    }
    switch (cp) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += attribute ? "&quot;" : "\"";
      break;
    case '\'':
      out += attribute ? "&apos;" : "'";
      break;
    case '\t':
      out += attribute ? "&#9;" : "\t";
      break;
    case '\n':
      out += attribute ? "&#10;" : "\n";
      break;
    case '\r':
      out += "&#13;";
      break; // parsers turn a raw CR into LF
    default:
      out.append(text.substr(start, i - start));
    }
  }
  return out;
}

namespace {

/// "1,3": the straggling ranks, for a JUnit property.
std::string straggler_ranks(const std::vector<Straggler>& stragglers) {
  std::string out;
  for (const Straggler& s : stragglers) out += (out.empty() ? "" : ",") + std::to_string(s.rank);
  return out;
}

} // namespace

std::string junit_xml(const RunReport& report) {
  const RunOutcome& o = report.outcome;
  int failures = 0;
  int errors = 0;
  int skipped = 0;
  std::string cases;
  // Named after the job, not the run id: CI keys test history on these names.
  const std::string suite = job_name(report.spec);
  const std::string classname = "air-run." + suite;
  const bool run_stopped = o.status == RunOutcome::Status::timed_out ||
                           o.status == RunOutcome::Status::interrupted ||
                           o.status == RunOutcome::Status::hung || o.status == RunOutcome::Status::preempted;

  for (std::size_t i = 0; i < o.ranks.size(); ++i) {
    const RankOutcome& r = o.ranks[i];
    const std::optional<RankError> none;
    const std::optional<RankError>& e = i < report.errors.size() ? report.errors[i] : none;
    cases += "  <testcase" + attr("classname", classname) + attr("name", "rank " + std::to_string(r.rank)) +
             attr("time", seconds3(r.duration_s)) + ">\n";
    if (!r.spawn_error.empty()) {
      ++errors;
      cases += "    <error" + attr("message", describe_rank_end(r)) + attr("type", "spawn_error") + "/>\n";
    } else if (rank_failed(r)) {
      ++failures;
      // The exception is what a reader of a CI page needs first; the exit
      // code alone ("exit code 1") says nothing.
      std::string headline;
      if (e && e->source == RankError::Source::error_file)
        headline = e->type.empty() ? e->message : e->message.empty() ? e->type : e->type + ": " + e->message;
      else
        headline = exception_line(join_tail(r));
      const std::string message =
          headline.empty() ? describe_rank_end(r) : headline + " (" + describe_rank_end(r) + ")";
      cases += "    <failure" + attr("message", bounded_head(message, k_junit_message_bytes)) +
               attr("type", failure_type(r, e)) + ">";
      cases += xml_escape(bounded_text(e ? e->traceback : std::string(), k_junit_body_bytes), false);
      cases += "</failure>\n";
    } else if (r.stopped_by_air_run) {
      const std::string message =
          "stopped by air-run" +
          (o.reason.empty() ? "" : ": " + bounded_head(o.reason, k_junit_message_bytes));
      if (run_stopped) {
        ++errors;
        cases += "    <error" + attr("message", message) + attr("type", to_string(o.status)) + "/>\n";
      } else {
        ++skipped;
        cases += "    <skipped" + attr("message", message) + "/>\n";
      }
    } else if (r.status.kind == ExitStatus::Kind::not_exited) {
      ++skipped;
      cases += "    <skipped" + attr("message", "not started") + "/>\n";
    }
    const std::string tail = join_tail(r);
    if (!tail.empty())
      cases +=
          "    <system-out>" + xml_escape(bounded_text(tail, k_junit_body_bytes), false) + "</system-out>\n";
    cases += "  </testcase>\n";
  }

  std::size_t tests = o.ranks.size();
  if (report.refusal != nullptr) {
    // Nothing ran, yet CI must show a failure under the job's usual name, with the reason.
    ++tests;
    ++failures;
    cases +=
        "  <testcase" + attr("classname", classname) + attr("name", "launch") + attr("time", "0.000") + ">\n";
    cases += "    <failure" + attr("message", report.refusal->message) +
             attr("type", "launch_refused_" + std::string(to_string(report.refusal->kind))) + ">" +
             xml_escape(report.refusal->message, false) + "</failure>\n  </testcase>\n";
  }
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuite" + attr("name", suite) + attr("tests", std::to_string(tests)) +
         attr("failures", std::to_string(failures)) + attr("errors", std::to_string(errors)) +
         attr("skipped", std::to_string(skipped)) + attr("time", seconds3(o.duration_s)) +
         attr("timestamp", ant_timestamp(o.started_at)) + attr("hostname", report.host) + ">\n";
  out += "  <properties>\n";
  const std::pair<std::string, std::string> props[] = {
      {"run_id", report.plan.run_id},
      {"status", std::string(to_string(o.status))},
      {"exit_code", std::to_string(report.exit_code)},
      {"reason", bounded_head(o.reason, k_junit_message_bytes)},
      {"accelerator_type", report.selection.accelerator_type},
  };
  for (const auto& [name, value] : props) {
    out += "    <property" + attr("name", name) + attr("value", value) + "/>\n";
  }
  // Only when there is news: a hang's diagnosis, the straggling ranks.
  if (o.hang) out += "    <property" + attr("name", "hang") + attr("value", o.hang->diagnosis.line) + "/>\n";
  if (!o.stragglers.empty())
    out +=
        "    <property" + attr("name", "stragglers") + attr("value", straggler_ranks(o.stragglers)) + "/>\n";
  out += "  </properties>\n";
  out += cases;
  out += "</testsuite>\n";
  return out;
}

} // namespace air
