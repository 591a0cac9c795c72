#include "core/report/collect.hpp"

#include "core/base/text.hpp"
#include "core/os/file_read.hpp"
#include "core/report/shown_tail.hpp"
#include "core/report/traceback.hpp"

#include <fmt/format.h>

#include <dirent.h>

#include <csignal>
#include <ctime>
#include <memory>
#include <unordered_set>

namespace air {

RankResult read_rank_result(const std::string& path, std::uint64_t max_bytes) {
  RankResult result;
  if (path.empty()) return result;
  FileRead file = read_small_file(path, max_bytes, FileWriter::us);
  result.size_bytes = file.size;
  switch (file.state) {
  case FileRead::State::missing:
    return result;
  case FileRead::State::too_large:
    result.state = RankResult::State::too_large;
    result.error = "result file is " + std::to_string(file.size) + " bytes, over the limit of " +
                   std::to_string(max_bytes) + " bytes";
    return result;
  case FileRead::State::unreadable:
    result.state = RankResult::State::invalid;
    result.error = file.error;
    return result;
  case FileRead::State::ok:
    break;
  }
  result = parse_rank_result(file.text);
  result.excerpt = strip_control_characters(result.excerpt, LineBreaks::keep);
  return result;
}

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
  if (rank.oom_killed)
    text += rank.status.kind == ExitStatus::Kind::signaled && rank.status.signal == SIGKILL
                ? ", killed by the OOM killer"
                : ", after the OOM killer killed a process of the run (a child, such as a DataLoader worker)";
  return text;
}

const RankPlan* find_rank_plan(const LaunchPlan& plan, int rank) {
  // The plan lists a node's ranks in order, from its first: rank N is
  // usually at N - first, so a report of 1,024 ranks makes no 500,000 comparisons.
  if (!plan.ranks.empty()) {
    const long at = static_cast<long>(rank) - plan.ranks.front().rank;
    if (at >= 0 && at < static_cast<long>(plan.ranks.size()) &&
        plan.ranks[static_cast<std::size_t>(at)].rank == rank)
      return &plan.ranks[static_cast<std::size_t>(at)];
  }
  for (const RankPlan& r : plan.ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

std::optional<RankError> rank_error(const RankOutcome& rank,
                                    const std::optional<ErrorFileRecord>& error_file) {
  // A rank that exited 0 failed at nothing, whatever its error file says
  // (torchrun reads them only for failed ranks too): a sys.exit("message")
  // the program caught and went on from leaves one.
  if (error_file && !rank.status.success()) {
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
  e.traceback = shown_tail_text(rank.tail);
  // The exception the tail ends on names the type, as an error file would.
  e.type = split_exception_message(exception_line(e.traceback)).first;
  return e;
}

namespace {

/// The names in `dir`, listed once, or nullopt when it cannot be listed.
/// Most ranks leave no result or error file: one listing of the run
/// directory spares the report opening each rank's missing files (at 128
/// ranks, 256 failed opens took 1.96 ms of every launch).
std::optional<std::unordered_set<std::string>> names_in(const std::string& dir) {
  if (dir.empty()) return std::nullopt;
  const std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) return std::nullopt;
  std::unordered_set<std::string> names;
  while (const dirent* e = ::readdir(d.get())) names.emplace(e->d_name);
  return names;
}

/// Whether `path` may exist: false only for a file of `dir` missing from its listing.
bool may_exist(const std::string& path, const std::string& dir,
               const std::optional<std::unordered_set<std::string>>& listed) {
  if (!listed || path.size() <= dir.size() + 1 || path.compare(0, dir.size(), dir) != 0 ||
      path[dir.size()] != '/')
    return true;
  const std::string_view name = std::string_view(path).substr(dir.size() + 1);
  if (name.find('/') != std::string_view::npos) return true;
  return listed->count(std::string(name)) > 0;
}

} // namespace

RunReport collect_report(const LaunchSpec& spec, const Hardware& hardware, const Selection& selection,
                         const LaunchPlan& plan, const RunOutcome& outcome, int exit_code, std::string host) {
  RunReport report{spec, hardware, selection, plan, outcome, std::move(host), exit_code, {}, {}};
  // The ranks have ended: what they wrote is there now, and stays.
  const auto listed = names_in(plan.run_dir);
  const auto exists = [&](const std::string& path) { return may_exist(path, plan.run_dir, listed); };
  for (const RankOutcome& rank : outcome.ranks) {
    const RankPlan* rp = find_rank_plan(plan, rank.rank);
    // Results are read for every rank, failed or not: a result is never lost
    // because another rank failed.
    report.results.push_back(rp != nullptr && exists(rp->result_file) ? read_rank_result(rp->result_file)
                                                                      : RankResult{});
    // An error file counts only for a rank that failed (rank_error).
    const std::optional<ErrorFileRecord> file =
        rp != nullptr && !rank.status.success() && exists(rp->error_file) ? read_error_file(rp->error_file)
                                                                          : std::nullopt;
    report.errors.push_back(rank_error(rank, file));
  }
  return report;
}

} // namespace air
