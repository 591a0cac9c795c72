#include "core/report/collect.hpp"

#include <fmt/format.h>

#include <ctime>

namespace air {

std::string_view to_string(RankError::Source source) {
  switch (source) {
  case RankError::Source::error_file:
    return "error_file";
  case RankError::Source::output_tail:
    return "output_tail";
  case RankError::Source::spawn:
    return "spawn";
  }
  return "output_tail";
}

bool rank_failed(const RankOutcome& rank) {
  if (!rank.spawn_error.empty()) return true;
  if (rank.stopped_by_air_run) return false;
  return rank.status.kind != ExitStatus::Kind::not_exited && !rank.status.success();
}

std::string describe_rank_end(const RankOutcome& rank) {
  if (!rank.spawn_error.empty()) return "could not be started: " + rank.spawn_error;
  std::string text = rank.status.describe();
  if (rank.oom_killed) text += ", killed by the OOM killer";
  return text;
}

const RankPlan* find_rank_plan(const LaunchPlan& plan, int rank) {
  for (const RankPlan& r : plan.ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

std::optional<RankError> rank_error(const RankOutcome& rank,
                                    const std::optional<ErrorFileRecord>& error_file) {
  if (error_file) {
    RankError e;
    e.source = RankError::Source::error_file;
    e.type = error_file->type;
    e.message = error_file->malformed ? "unusable TORCHELASTIC_ERROR_FILE: " + error_file->message
                                      : error_file->message;
    e.traceback = error_file->malformed ? error_file->raw : error_file->traceback;
    e.timestamp = error_file->timestamp;
    return e;
  }
  if (!rank_failed(rank)) return std::nullopt;
  RankError e;
  if (!rank.spawn_error.empty()) {
    e.source = RankError::Source::spawn;
    e.message = rank.spawn_error;
    return e;
  }
  e.source = RankError::Source::output_tail;
  e.message = describe_rank_end(rank);
  for (const std::string& line : rank.tail) {
    if (!e.traceback.empty()) e.traceback += '\n';
    e.traceback += line;
  }
  return e;
}

RunReport collect_report(const LaunchSpec& spec, const Hardware& hardware, const Selection& selection,
                         const LaunchPlan& plan, const RunOutcome& outcome, int exit_code, std::string host) {
  RunReport report{spec, hardware, selection, plan, outcome, std::move(host), exit_code, {}, {}};
  for (const RankOutcome& rank : outcome.ranks) {
    const RankPlan* rp = find_rank_plan(plan, rank.rank);
    // Results are read for every rank, failed or not: a result is never lost
    // because another rank failed.
    report.results.push_back(rp != nullptr ? read_rank_result(rp->result_file) : RankResult{});
    const std::optional<ErrorFileRecord> file =
        rp != nullptr ? read_error_file(rp->error_file) : std::nullopt;
    report.errors.push_back(rank_error(rank, file));
  }
  return report;
}

std::string format_utc(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto ms_total = duration_cast<milliseconds>(t.time_since_epoch()).count();
  auto secs = static_cast<std::time_t>(ms_total / 1000);
  auto ms = static_cast<int>(ms_total % 1000);
  if (ms < 0) { // before 1970: floor, not truncate
    ms += 1000;
    secs -= 1;
  }
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04d}-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:03d}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

} // namespace air
