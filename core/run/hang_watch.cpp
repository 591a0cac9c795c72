// The hang watch: diagnosing ranks that make no progress, on one node or across nodes.
#include "core/run/hang_watch.hpp"

#include "core/base/duration.hpp"
#include "core/hang/diagnosis.hpp"
#include "core/hang/flight_recorder.hpp"
#include "core/hang/job_hang.hpp"
#include "core/hang/rank_activity.hpp"
#include "core/os/file_read.hpp"
#include "core/run/progress.hpp"

#include <algorithm>
#include <ctime>
#include <utility>

namespace air {

namespace {

/// Across nodes with --on-hang stop: how long a node whose ranks hang waits
/// for node 0's job-wide verdict before it stops on its own (node 0 gathers
/// the places for up to 10 s; an older node 0 never answers).
constexpr auto k_job_hang_verdict_wait = std::chrono::seconds(30);
/// At most this much of a rank's Flight Recorder dump is read (2000 entries
/// of about 500 bytes each).
constexpr std::size_t k_flight_recorder_max = 4 * 1024 * 1024;
/// The ranks' work counters are read this long before a quiet spell's limit
/// (at most half the limit) and again at it: a rank whose CPU time or I/O
/// grew in between works.
constexpr auto k_work_window = std::chrono::seconds(1);

/// "12:01:03": a wall-clock time for the diagnosis line.
std::string clock_time(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &tm);
  return text;
}

} // namespace

HangWatch::HangWatch(const LaunchPlan& plan, RankTable& ranks, RunOutcome& out, Console& console,
                     ProgressWatch& progress, StackDumps& stacks, const Teardown& teardown,
                     const SupervisorHooks* hooks, Tell tell, Stop stop, Clock::time_point start)
    : plan_(plan), ranks_(ranks), out_(out), console_(console), progress_(progress), stacks_(stacks),
      teardown_(teardown), hooks_(hooks), tell_(std::move(tell)), stop_(std::move(stop)),
      clock_(plan.hang_timeout, start, plan.hang_startup) {}

HangWatch::Clock::duration HangWatch::work_window() const {
  return std::min<Clock::duration>(k_work_window, clock_.quiet_limit() / 2);
}

bool HangWatch::counters_fresh() const { return counters_at_ && counters_spell_ == clock_.last_progress(); }

std::optional<HangWatch::Clock::time_point> HangWatch::quiet_deadline() const {
  const auto limit = clock_.next_deadline();
  if (!limit) return limit;
  if (!counters_fresh()) return *limit - work_window();
  return std::max(*limit, *counters_at_ + work_window());
}

std::optional<HangWatch::Clock::time_point> HangWatch::next_deadline(bool tearing_down) const {
  std::optional<Clock::time_point> next = tearing_down ? std::nullopt : quiet_deadline();
  if (verdict_deadline_ && (!next || *verdict_deadline_ < *next)) next = verdict_deadline_;
  if (places_ready_) {
    const auto measured = asked_at_ + work_window();
    if (!next || measured < *next) next = measured;
  }
  return next;
}

void HangWatch::tick(Clock::time_point now) {
  // Node 0's question: the stacks are in, the places go out once the work is measured.
  if (places_ready_ && now >= asked_at_ + work_window()) {
    places_ready_ = false;
    finish();
  }
  if (!teardown_.active() && out_.status == RunOutcome::Status::succeeded && !stacks_.waiting()) {
    const auto limit = clock_.next_deadline();
    if (limit && now >= *limit - work_window() && !counters_fresh()) {
      std::vector<pid_t> groups;
      for (const auto& r : ranks_) groups.push_back(r.running() ? r.pid : -1);
      counters_ = read_work_counters(groups);
      counters_at_ = now;
      counters_spell_ = clock_.last_progress();
    }
    if (clock_.due(now) && counters_fresh() && now - *counters_at_ >= work_window() &&
        judge_quiet_spell(now) == Quiet::hang) {
      begin();
      tell_(NodeEvent::quiet_ranks());
    }
  }
  if (verdict_deadline_ && now >= *verdict_deadline_) {
    verdict_deadline_.reset();
    // Node 0 never decided (an older agent, or no --hang-timeout there): stop as one node would.
    if (clock_.diagnosed() && out_.hang && !teardown_.active() &&
        out_.status == RunOutcome::Status::succeeded)
      conclude(std::move(*out_.hang), {});
  }
}

/// The spell reached its limit: reads the work counters again and judges.
/// A working rank, or finished ranks with nobody waiting, begin a new spell.
Quiet HangWatch::judge_quiet_spell(Clock::time_point now) {
  std::vector<pid_t> groups;
  for (const auto& r : ranks_) groups.push_back(r.running() ? r.pid : -1);
  const std::vector<WorkCounters> after = read_work_counters(groups);
  const double elapsed_s = std::chrono::duration<double>(now - *counters_at_).count();
  std::vector<QuietRank> quiet;
  working_.assign(ranks_.size(), false);
  for (const auto& r : ranks_) {
    const ProgressReading& p = progress_.reading(r.index);
    QuietRank q;
    q.rank = r.plan->rank;
    q.running = r.running();
    q.exited_ok = r.reaped && out_.ranks[r.index].status.success();
    q.in_collective = p.attached && p.coll_entered_ns != 0;
    q.working = q.running && r.index < counters_.size() &&
                worked(counters_[r.index], after[r.index], elapsed_s, clock_ticks_per_second(),
                       r.plan->gpu_uuid.empty());
    if (r.index < working_.size()) working_[r.index] = q.working;
    quiet.push_back(q);
  }
  const QuietVerdict verdict = judge_quiet(quiet);
  if (verdict.kind != Quiet::hang) clock_.busy(now);
  return verdict.kind;
}

/// No rank made progress for --hang-timeout: ask the ranks for their stacks
/// and Flight Recorder traces; finish() reads them.
void HangWatch::begin() {
  // What the summary keeps should the job find this spell no hang.
  if (!std::exchange(withdrawable_, true)) hang_before_ = out_.hang;
  clock_.diagnosing();
  progress_.request_flight_recorder();
  // Stacks already asked for (Ctrl-\\, a timeout) keep their purpose: go on without.
  if (stacks_.waiting() || !stacks_.request(StackPurpose::hang, Clock::now())) finish();
}

void HangWatch::answer_places_asked() {
  if (stacks_.waiting() && stacks_.purpose() == StackPurpose::hang) {
    // finish() answers
  } else if (clock_.diagnosed() && !local_places_.empty()) {
    tell_(NodeEvent::placed_ranks(local_places_));
  } else {
    // Not quiet here (yet): this node's ranks' work is measured over a
    // window of its own, from now, so that node 0 can tell a rank that works
    // alone (a checkpoint save the others wait for) from one that waits.
    asked_ = true;
    std::vector<pid_t> groups;
    for (const auto& r : ranks_) groups.push_back(r.running() ? r.pid : -1);
    asked_counters_ = read_work_counters(groups);
    asked_at_ = Clock::now();
    measuring_ = true;
    begin();
  }
}

/// The window that began with node 0's question is over: which ranks worked.
void HangWatch::measure_asked(Clock::time_point now) {
  measuring_ = false;
  std::vector<pid_t> groups;
  for (const auto& r : ranks_) groups.push_back(r.running() ? r.pid : -1);
  const std::vector<WorkCounters> after = read_work_counters(groups);
  const double elapsed_s = std::chrono::duration<double>(now - asked_at_).count();
  working_.assign(ranks_.size(), false);
  for (const auto& r : ranks_)
    if (r.running() && r.index < asked_counters_.size() && r.index < after.size())
      working_[r.index] = worked(asked_counters_[r.index], after[r.index], elapsed_s,
                                 clock_ticks_per_second(), r.plan->gpu_uuid.empty());
}

/// This node's ranks' places at `now`: each one's collective (from its
/// progress page), its stack's user frame and its Flight Recorder dump.
HangReport HangWatch::local_report(Clock::time_point now) {
  const auto wall_now = std::chrono::system_clock::now();
  const std::int64_t mono_now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  HangReport report;
  report.quiet_s = clock_.quiet_s(now);
  report.at = wall_now;
  for (auto& r : ranks_) {
    const ProgressReading& p = progress_.reading(r.index);
    RankOutcome& o = out_.ranks[r.index];
    HangRank h;
    h.rank = r.plan->rank;
    h.running = r.running();
    h.counted = p.attached;
    h.steps = p.steps;
    h.collective_seq = p.coll_seq;
    h.in_collective = p.attached && p.coll_entered_ns != 0;
    if (h.in_collective) {
      h.collective = std::string(collective_name(p.coll_op));
      h.waiting_s = std::max(0.0, static_cast<double>(mono_now_ns - p.coll_entered_ns) / 1e9);
      h.since = clock_time(wall_now - std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                          std::chrono::duration<double>(h.waiting_s)));
    }
    h.place = user_place(o.stack);
    h.exited_ok = r.reaped && o.status.success();
    // Not quiet: it worked over the latest window, or wrote output within the
    // hang timeout (a `\r` bar on this node while another node's ranks wait).
    h.working = h.running && ((r.index < working_.size() && working_[r.index]) ||
                              (o.last_output_at && now - *o.last_output_at < clock_.quiet_limit()));
    if (p.fr_armed) {
      const std::string fr = r.plan->progress_file + ".fr.json";
      const FileRead dump = read_small_file(fr, k_flight_recorder_max, FileWriter::us);
      if (dump.state == FileRead::State::ok) {
        report.flight_recorder_files.push_back(fr);
        if (const auto state = parse_flight_recorder(dump.text)) {
          h.nccl_enqueued = state->last_enqueued;
          h.nccl_op = state->last_op;
          h.nccl_state = state->last_state;
        }
      }
    }
    report.ranks.push_back(std::move(h));
  }
  return report;
}

/// Names the laggards from each rank's place in its collectives and its
/// stack, prints the diagnosis and records it; with --on-hang stop, ends the run.
void HangWatch::finish() {
  const auto now = Clock::now();
  if (measuring_) {
    if (now < asked_at_ + work_window()) {
      places_ready_ = true; // tick() comes back at the window's end
      return;
    }
    measure_asked(now);
  }
  HangReport report = local_report(now);
  report.diagnosis = diagnose_hang(report.ranks);
  const std::string quiet =
      format_duration(std::chrono::duration_cast<Millis>(std::chrono::duration<double>(report.quiet_s)));
  local_places_ = report.ranks;
  const bool asked = std::exchange(asked_, false);
  if (hooks_ && hooks_->job_wide_hangs()) {
    // Node 0 names the job's laggards and decides; this node's picture goes
    // to it, to this node's console and to its summary.
    tell_(NodeEvent::placed_ranks(report.ranks));
    std::string batch =
        asked ? "air-run: node 0 asks where this node's ranks are: " + report.diagnosis.line + "\n"
              : "air-run: no progress on this node for " + quiet +
                    " (no step, no output): " + report.diagnosis.line + "\n" +
                    "air-run: node 0 names the job's laggards from every node's ranks\n";
    console_.say(batch, asked ? 1 : 2);
    if (!asked && plan_.stop_on_hang) verdict_deadline_ = now + k_job_hang_verdict_wait;
    out_.hang = std::move(report);
    return;
  }
  conclude(std::move(report), "air-run: no progress for " + quiet + " (no step, no output): ");
}

void HangWatch::finish_job(JobPlaces job) {
  if (!plan_.hang_timeout) return; // another node's --hang-timeout: this one watches none
  const auto now = Clock::now();
  // Each node measured its own ranks' work: a rank that works alone, or ranks
  // that finished while none waits, make the job's quiet no hang.
  const QuietVerdict verdict = judge_job_quiet(job);
  if (verdict.kind != Quiet::hang) {
    std::string why;
    if (verdict.kind == Quiet::working) {
      std::vector<int> nodes;
      for (const HangRank& r : job.ranks)
        if (std::find(verdict.working.begin(), verdict.working.end(), r.rank) != verdict.working.end() &&
            std::find(nodes.begin(), nodes.end(), r.node) == nodes.end())
          nodes.push_back(r.node);
      why = (verdict.working.size() > 1 ? "ranks " : "rank ") + rank_words(verdict.working) + " (node" +
            (nodes.size() > 1 ? "s " : " ") + rank_words(nodes) + ") " +
            (verdict.working.size() > 1 ? "work" : "works") + " outside any collective";
    } else {
      why = "ranks finished and no rank waits in a collective";
    }
    console_.write(1, "air-run: the job, across the nodes: " + why + ": quiet, not hung; the run goes on\n",
                   1);
    tell_(NodeEvent::no_hang_found());
    not_hung(now);
    return;
  }
  HangReport report;
  report.at = std::chrono::system_clock::now();
  // At least one node was quiet for --hang-timeout; node 0's own ranks maybe longer.
  report.quiet_s = std::max(std::chrono::duration<double>(*plan_.hang_timeout).count(),
                            clock_.diagnosed() ? clock_.quiet_s(now) : 0.0);
  if (out_.hang) report.flight_recorder_files = out_.hang->flight_recorder_files;
  report.diagnosis = diagnose_job_hang(job);
  report.ranks = std::move(job.ranks);
  const std::string quiet =
      format_duration(std::chrono::duration_cast<Millis>(std::chrono::duration<double>(report.quiet_s)));
  conclude(std::move(report), "air-run: the job, across the nodes: no progress for " + quiet + ": ");
}

void HangWatch::job_not_hung() {
  if (!withdrawable_) return; // decided already
  console_.write(1, "air-run: node 0 finds the job quiet, not hung; the run goes on\n", 1);
  not_hung(Clock::now());
}

/// The job's quiet spell was no hang: this node's diagnosis of it is
/// withdrawn (the summary keeps the one before, if any) and a new spell begins.
void HangWatch::not_hung(Clock::time_point now) {
  // After progress a new spell is under way already: it keeps its start.
  if (clock_.diagnosed()) clock_.busy(now);
  withdrawable_ = false;
  verdict_deadline_.reset();
  local_places_.clear();
  out_.hang = std::move(hang_before_);
  hang_before_.reset();
}

/// Prints a diagnosis (`lead` starts its line; none: only the verdict's line)
/// and records it; with --on-hang stop, ends the run with status hung.
void HangWatch::conclude(HangReport report, const std::string& lead) {
  const bool stop = plan_.stop_on_hang && plan_.hang_timeout;
  verdict_deadline_.reset(); // decided
  withdrawable_ = false;
  std::string batch;
  std::size_t lines = 0;
  if (!lead.empty()) {
    batch = lead + report.diagnosis.line + "\n";
    ++lines;
  }
  if (!report.diagnosis.laggards.empty()) {
    batch += "air-run: the others wait for rank" +
             std::string(report.diagnosis.laggards.size() > 1 ? "s " : " ") +
             rank_words(report.diagnosis.laggards) +
             (stop ? "; stopping the run (--on-hang stop)\n" : "; the run goes on (--on-hang report)\n");
    ++lines;
  } else {
    batch += stop ? "air-run: stopping the run (--on-hang stop)\n"
                  : "air-run: the run goes on (--on-hang report); Ctrl-\\ shows every stack\n";
    ++lines;
  }
  console_.say(batch, lines);
  out_.hang = std::move(report);
  if (stop && !teardown_.active() && out_.status == RunOutcome::Status::succeeded) {
    out_.status = RunOutcome::Status::hung;
    // The quiet time that made the hang: --hang-timeout, or the start-up
    // allowance when no rank had shown a sign of life yet (not the timeout then).
    out_.reason =
        "hung: no progress for " + format_duration(std::chrono::duration_cast<Millis>(clock_.quiet_limit()));
    if (!out_.hang->diagnosis.laggards.empty())
      out_.reason += "; the others wait for rank" +
                     std::string(out_.hang->diagnosis.laggards.size() > 1 ? "s " : " ") +
                     rank_words(out_.hang->diagnosis.laggards);
    stop_();
  }
}

} // namespace air
