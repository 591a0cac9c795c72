#include "core/report/text.hpp"

#include "core/base/speaker.hpp"
#include "core/report/shown_tail.hpp"
#include "core/run/console_style.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace air {
namespace {

std::string rank_label(const RankOutcome& r) {
  std::string out = "rank " + std::to_string(r.rank) + " (local_rank " + std::to_string(r.local_rank);
  if (r.pid > 0) out += ", pid " + std::to_string(r.pid);
  return out + ")";
}

std::string error_headline(const RankError& e) {
  if (e.type.empty()) return e.message;
  if (e.message.empty()) return e.type;
  return e.type + ": " + e.message;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

// The end of a traceback or tail is where the exception is: keep the last lines.
void append_indented_tail(std::string& out, const std::string& text, int max_lines) {
  std::vector<std::string> lines = split_lines(text);
  const std::size_t keep = max_lines > 0 ? static_cast<std::size_t>(max_lines) : 50;
  std::size_t first = 0;
  if (lines.size() > keep) {
    first = lines.size() - keep;
    out += "      ... (" + std::to_string(first) + (first == 1 ? " earlier line)\n" : " earlier lines)\n");
  }
  for (std::size_t i = first; i < lines.size(); ++i) out += "      " + lines[i] + "\n";
}

/// Whether rank `r` was asked to stop at the preemption's step.
bool asked_to_stop(const RunOutcome& o, const RankOutcome& r) {
  if (!o.preemption) return false;
  const std::vector<int>& asked = o.preemption->polling_ranks;
  return std::find(asked.begin(), asked.end(), r.rank) != asked.end();
}

/// Whether the preemption's lines say how rank `r` ended: asked to stop,
/// it ended otherwise than at the step (and not by the grace period's
/// SIGKILL, which has its own line). Such a rank is no root cause.
bool missed_stop_step(const RunOutcome& o, const RankOutcome& r) {
  return asked_to_stop(o, r) && !r.killed && r.status.kind != ExitStatus::Kind::not_exited &&
         !stopped_at_stop_step(r, o.preemption->stop_step);
}

// The root cause is the supervisor's choice; without one (e.g. launch failed)
// the first failed rank by observed end order stands in.
const RankOutcome* find_root_cause(const RunOutcome& o) {
  const RankOutcome* best = nullptr;
  for (const RankOutcome& r : o.ranks) {
    if (r.rank == o.root_cause_rank) return &r;
  }
  for (const RankOutcome& r : o.ranks) {
    if (!rank_failed(r) || missed_stop_step(o, r)) continue;
    if (best == nullptr || (r.end_order != 0 && (best->end_order == 0 || r.end_order < best->end_order))) {
      best = &r;
    }
  }
  return best;
}

// "0, 2-5, 7": sorted and de-duplicated, then spec's range folding with
// spaces for reading (the flag syntax is "0,2-5,7").
std::string join_ranks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return format_rank_list(ranks, ", ");
}

/// Where each rank was when the timeout hit or the run hung: its last line, how long ago
/// it came, and every thread's Python stack (core/run/stacks.hpp).
void append_stacks(std::string& out, const RunOutcome& o) {
  bool any = false;
  for (const RankOutcome& r : o.ranks) any = any || !r.stack.empty();
  if (!any) return;
  // The stacks are taken before a timeout's teardown and for a hang's diagnosis.
  out += o.status == RunOutcome::Status::hung ? "  stacks when the run hung:\n"
                                              : "  stacks when the run timed out:\n";
  for (const RankOutcome& r : o.ranks) {
    if (r.stack.empty()) continue;
    out += "    rank " + std::to_string(r.rank);
    if (r.tail.empty() || r.last_output_age_s < 0)
      out += ", no output yet:\n";
    else
      out +=
          ", last output " + format_seconds(r.last_output_age_s) + " ago: " + shown_last_line(r.tail) + "\n";
    for (const std::string& line : split_lines(r.stack))
      if (!line.empty()) out += "      " + line + "\n";
  }
}

/// One line per restarted attempt, numbered from 0 as TORCHELASTIC_RESTART_COUNT,
/// the log files and the summary number them: "  attempt 0 failed after 2.1s
/// (exit code 3): rank 1 exited with exit code 3: ValueError: bad batch; restart 1 of 2 followed".
/// An attempt ended to admit a node that joined says so instead: "  attempt 0
/// ended after 4.0s: stopped for a membership change: node3 joined, ...;
/// attempt 1 followed (a membership change: no restart counted)".
std::string format_attempts(const RunOutcome& o, int max_restarts) {
  std::string out;
  int restarts = 0; // restarts after a failure, which --max-restarts counts
  for (std::size_t i = 0; i + 1 < o.attempts.size(); ++i) {
    const AttemptRecord& a = o.attempts[i];
    if (a.status == "membership_change") {
      out += fmt::format("  attempt {} ended after {}: {}; attempt {} followed (a membership change: no "
                         "restart counted)\n",
                         a.attempt, format_seconds(a.duration_s), a.reason, a.attempt + 1);
      continue;
    }
    out += fmt::format("  attempt {} {} after {} (exit code {}): {}{}; restart {} of {} followed\n",
                       a.attempt, a.status == "hung" ? "hung" : "failed", format_seconds(a.duration_s),
                       a.exit_code, a.reason,
                       a.error.empty() || a.reason.find(a.error) != std::string::npos ? "" : ": " + a.error,
                       ++restarts, max_restarts);
  }
  return out;
}

/// Whether a rank ended on a failed import: then the interpreter is the
/// likeliest culprit (the first python3 on PATH instead of the venv's).
bool import_failed(const RankOutcome& r, const std::optional<RankError>* err) {
  const auto names_it = [](std::string_view text) {
    return text.find("ModuleNotFoundError") != std::string_view::npos ||
           text.find("ImportError") != std::string_view::npos;
  };
  if (err != nullptr && err->has_value() && (names_it((*err)->type) || names_it((*err)->traceback)))
    return true;
  return std::any_of(r.tail.begin(), r.tail.end(), [&](const std::string& line) { return names_it(line); });
}

/// "rank 0 did not stop at step 37: killed by SIGTERM at step 36, a signal
/// air-run did not send": what ended a rank that was asked to stop, told
/// apart from the stop it was asked for.
std::string missed_stop_line(const RankOutcome& r, std::uint64_t stop_step) {
  std::string out = "  rank " + std::to_string(r.rank) + " did not stop" +
                    (stop_step > 0 ? " at step " + std::to_string(stop_step) : std::string()) + ": ";
  const std::string at = r.steps ? " at step " + std::to_string(*r.steps) : std::string();
  if (r.oom_killed) return out + "killed by the OOM killer" + at + "\n";
  if (r.status.kind == ExitStatus::Kind::signaled)
    return out + "killed by " + signal_name(r.status.signal) + at + ", a signal air-run did not send\n";
  if (r.status.success()) return out + "exited 0" + at + ", before the stop step\n";
  return out + "exited with " + r.status.describe() + at + "\n";
}

/// The preemption's lines: who was asked to stop where, who stopped there,
/// who ended otherwise, who got the signal at once, and what was saved.
std::string format_preemption(const RunOutcome& o) {
  const PreemptionReport& p = *o.preemption;
  const std::string step = p.stop_step > 0 ? " at step " + std::to_string(p.stop_step) : std::string();
  const auto ranks = [](const std::vector<int>& r) {
    return (r.size() == 1 ? "rank " : "ranks ") + join_ranks(r);
  };
  std::string out;
  if (!p.polling_ranks.empty())
    out += "  asked to stop" + step + " (air.should_stop()): " + ranks(p.polling_ranks) + "\n";
  if (!p.stopped_ranks.empty()) out += "  stopped" + step + ": " + ranks(p.stopped_ranks) + "\n";
  for (const RankOutcome& r : o.ranks)
    if (missed_stop_step(o, r)) out += missed_stop_line(r, p.stop_step);
  if (!p.signalled_ranks.empty())
    out += "  sent " + signal_name(p.signal) +
           " at once (never asked air.should_stop()): " + ranks(p.signalled_ranks) + "\n";
  if (!p.checkpoint.empty()) out += "  latest checkpoint: " + p.checkpoint + "\n";
  if (p.job_wide)
    out += "  the stop step is the job's, picked by node 0 for every node (the signal reached node " +
           std::to_string(p.signal_node) + " first)" +
           (p.missing_nodes.empty()
                ? std::string()
                : std::string(p.missing_nodes.size() == 1 ? "; without node " : "; without nodes ") +
                      join_ranks(p.missing_nodes) + ", which sent no step count") +
           "\n";
  if (p.fallback)
    out += "  node 0 did not pick a stop step in time: this node's own, which other nodes may not share\n";
  if (p.cause == "time_limit") out += "  the signal is Slurm's time limit (SLURM_JOB_END_TIME)\n";
  if (p.cause == "time_limit_warning") out += "  the signal is Slurm's warning before the time limit\n";
  if (p.requeue == "requeued")
    out += "  Slurm requeued the job (scontrol requeue): its next run resumes from the checkpoint\n";
  else if (!p.requeue.empty())
    out += "  the job was not requeued: " + p.requeue + "\n";
  return out;
}

} // namespace

std::string format_warnings(const RunOutcome& o) {
  std::string out;
  for (const RankOutcome& r : o.ranks) {
    if (!r.log_error.empty())
      out +=
          "air-run: warning: rank " + std::to_string(r.rank) + "'s log is incomplete: " + r.log_error + "\n";
  }
  if (o.console_lines_dropped > 0) {
    const auto n = o.console_lines_dropped;
    out += "air-run: warning: " + std::to_string(n) + (n == 1 ? " line" : " lines") +
           " of rank output not shown on the console (it stopped taking output)\n";
  }
  if (o.hang && o.status != RunOutcome::Status::hung) {
    out += "air-run: warning: no progress for " + format_seconds(o.hang->quiet_s) +
           " during the run: " + o.hang->diagnosis.line + "\n";
  }
  for (const Straggler& s : o.stragglers) out += "air-run: warning: " + straggler_line(s) + "\n";
  if (o.leftover_processes > 0) {
    const auto n = o.leftover_processes;
    out += "air-run: ended " + std::to_string(n) + (n == 1 ? " process" : " processes") +
           " that the ranks left running";
    const auto& names = o.leftover_names;
    if (n == 1 && names.size() == 1) {
      out += ": " + names.front() + "\n";
    } else {
      out += names.empty() ? "\n" : ":\n";
      for (const std::string& name : names) out += "  " + name + "\n";
      if (!names.empty() && n > names.size()) out += "  and " + std::to_string(n - names.size()) + " more\n";
    }
  }
  return out;
}

namespace {

/// format_report() before its air-run lines name the node.
std::string report_lines(const RunReport& report, bool color) {
  const RunOutcome& o = report.outcome;
  const std::string run = "air-run: run " + report.plan.run_id + " ";
  const std::string restarts =
      o.restarts() == 0 ? "" : fmt::format(" and {} restart{}", o.restarts(), o.restarts() == 1 ? "" : "s");
  if (o.status == RunOutcome::Status::succeeded) {
    const std::size_t n = o.ranks.size();
    return run + "succeeded after " + format_seconds(o.duration_s) + restarts + ": " + std::to_string(n) +
           (n == 1 ? " rank" : " ranks") + " exited 0\n" + format_attempts(o, report.plan.max_restarts) +
           format_warnings(o);
  }
  std::string out = run + std::string(status_words(o.status)) + " after " + format_seconds(o.duration_s) +
                    restarts + " (exit code " + std::to_string(report.exit_code) + ")";
  if (!o.reason.empty()) out += ": " + o.reason;
  out += "\n" + format_attempts(o, report.plan.max_restarts);
  if (o.status == RunOutcome::Status::hung && o.hang) out += "  hang: " + o.hang->diagnosis.line + "\n";
  if (o.preemption)
    out += format_preemption(o);
  else if (!o.checkpoint.empty())
    out += "  latest checkpoint: " + o.checkpoint + "\n"; // Ctrl-C, a failure

  const RankOutcome* root = find_root_cause(o);
  if (root != nullptr) {
    const std::size_t i = static_cast<std::size_t>(root - o.ranks.data());
    out += paint("  root cause: " + rank_label(*root) + ": " + describe_rank_end(*root) + "\n", Paint::red,
                 color);
    const std::optional<RankError>* err = i < report.errors.size() ? &report.errors[i] : nullptr;
    if (err != nullptr && err->has_value()) {
      const RankError& e = **err;
      if (e.source == RankError::Source::error_file) {
        // A message of several lines keeps the report's indentation on each.
        for (const std::string& line : split_lines(error_headline(e))) out += "    " + line + "\n";
        append_indented_tail(out, e.traceback, report.plan.tail_lines);
      } else if (e.source == RankError::Source::output_tail) {
        if (e.traceback.empty())
          out += "    (no output)\n";
        else {
          out += "    last output lines:\n";
          append_indented_tail(out, e.traceback, report.plan.tail_lines);
        }
      }
    }
    const RankPlan* rp = find_rank_plan(report.plan, root->rank);
    if (rp != nullptr && !rp->log_file.empty()) out += "    log: " + rp->log_file + "\n";
    if (!report.spec.no_python.value && import_failed(*root, err)) {
      const std::string python = report.describe_python ? report.describe_python() : report.spec.python.value;
      out += "    Python: " + python + " (environment.python, " + report.spec.python.origin.describe() +
             "); --python or AIR_RUN_PYTHON picks another\n";
    }
  }

  std::vector<int> stopped;
  for (std::size_t i = 0; i < o.ranks.size(); ++i) {
    const RankOutcome& r = o.ranks[i];
    if (r.stopped_by_air_run && r.spawn_error.empty()) stopped.push_back(r.rank);
    if (&r == root || !rank_failed(r) || missed_stop_step(o, r)) continue;
    out += "  also failed: " + rank_label(r) + ": " + describe_rank_end(r);
    if (i < report.errors.size() && report.errors[i] &&
        report.errors[i]->source == RankError::Source::error_file) {
      // One line a rank: a message's first line.
      const std::string headline = error_headline(*report.errors[i]);
      const auto nl = headline.find('\n');
      out += ": " + headline.substr(0, nl) + (nl == std::string::npos ? "" : " ...");
    }
    out += "\n";
  }
  if (!stopped.empty()) {
    out += std::string("  stopped by air-run: ") + (stopped.size() == 1 ? "rank " : "ranks ") +
           join_ranks(stopped) + "\n";
  }
  std::vector<int> killed;
  for (const RankOutcome& r : o.ranks)
    if (r.killed) killed.push_back(r.rank);
  if (!killed.empty()) {
    const std::string who = std::string(killed.size() == 1 ? "rank " : "ranks ") + join_ranks(killed);
    if (o.kill_requested)
      out += "  killed (SIGKILL) at the second interrupt: " + who + "\n";
    else
      out += "  still running after the " +
             format_seconds(static_cast<double>(report.plan.grace_period.count()) / 1000.0) +
             " grace period, killed (SIGKILL): " + who + "\n";
  }
  append_stacks(out, o);
  return out + format_warnings(o);
}

} // namespace

std::string format_report(const RunReport& report, bool color) {
  return name_node(report_lines(report, color), report.plan.node_rank, report.plan.num_nodes);
}

} // namespace air
