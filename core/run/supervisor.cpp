// The supervisor: one single-threaded event loop, ninja-style, over the
// parts of a run that each own their state, say when they next need a look
// and get a turn every pass (core/run/rank_table.hpp and its neighbours).
#include "core/run/supervisor.hpp"

#include "core/base/duration.hpp"
#include "core/base/text.hpp"
#include "core/os/containment.hpp"
#include "core/os/file_read.hpp"
#include "core/os/process.hpp"
#include "core/os/signals.hpp"
#include "core/run/console.hpp"
#include "core/run/diagnosis.hpp"
#include "core/run/exits.hpp"
#include "core/run/flight_recorder.hpp"
#include "core/run/hang_watch.hpp"
#include "core/run/lost_peer.hpp"
#include "core/run/progress.hpp"
#include "core/run/progress_watch.hpp"
#include "core/run/rank_output.hpp"
#include "core/run/rank_spawn.hpp"
#include "core/run/rank_table.hpp"
#include "core/run/signal_actions.hpp"
#include "core/run/stack_dumps.hpp"
#include "core/run/stdin_relay.hpp"
#include "core/run/stragglers.hpp"
#include "core/run/teardown.hpp"
#include "core/run/warm_start.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int k_max_poll_wait_ms = 1000;
/// Across nodes with --on-hang stop: how long a node whose ranks hang waits
/// for node 0's job-wide verdict before it stops on its own (node 0 gathers
/// the places for up to 10 s; an older node 0 never answers).
constexpr auto k_job_hang_verdict_wait = std::chrono::seconds(30);
/// At the end, how long the console may take nothing before the rest of
/// air-run's buffered echo is dropped (counted in console_lines_dropped).
constexpr int k_console_stall_ms = 1000;
/// At most this much of a rank's Flight Recorder dump is read (2000 entries
/// of about 500 bytes each).
constexpr std::size_t k_flight_recorder_max = 4 * 1024 * 1024;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// "12:01:03": a wall-clock time for the diagnosis line.
std::string clock_time(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &tm);
  return text;
}

/// The earliest of the deadlines the parts report.
class Earliest {
public:
  void consider(std::optional<Clock::time_point> t) {
    if (t && (!next_ || *t < *next_)) next_ = t;
  }
  std::optional<Clock::time_point> get() const { return next_; }

private:
  std::optional<Clock::time_point> next_;
};

/// One pass's poll set: the signalfd first, then the ranks' pipes, the
/// console's descriptors, the hooks', and air-run's stdin relay last.
struct PollSet {
  std::vector<pollfd> fds;
  std::vector<std::pair<RankState*, RankStream*>> owners; ///< by fds index from 1, for the pipes
  std::size_t first_sink = 0;
  std::size_t first_hook = 0;
  std::size_t stdin_index = 0;
};

class Supervisor {
public:
  Supervisor(const LaunchPlan& plan, const ConsoleOptions& console, SupervisorHooks* hooks, WarmStart* warm)
      : plan_(plan), hooks_(hooks), start_(Clock::now()), ranks_(plan, console, out_), console_(console),
        teardown_(plan.grace_period), hang_(plan.hang_timeout, start_),
        output_(plan, ranks_, console_, out_, teardown_, hang_), exits_(ranks_, out_),
        stacks_(ranks_, plan.stack_signal), stragglers_(ranks_), spawn_(ranks_, out_, console_, warm),
        progress_(ranks_.size()), warm_(warm) {}

  RunOutcome run();

private:
  void start();
  void iterate();
  PollSet poll_set();
  int poll_timeout_ms(Clock::time_point now) const;
  void take_ready(PollSet& set);
  std::optional<Clock::time_point> next_deadline(Clock::time_point now) const;
  bool finished() const;
  void finalize();
  LiveSnapshot live_snapshot(Clock::time_point now) const;
  void live_tick() {
    console_.live_tick(Clock::now(), [this] { return live_snapshot(Clock::now()); });
  }

  void handle_signals();
  void interrupt(int sig);
  void poll_failed();
  void reap();
  void on_rank_ended(RankState& r);
  void spawn_failed(RankState& r, const Error& e);
  void fail(RankState& r, std::string reason, bool lost_peer);
  void stop_for_remote(RemoteFailure failure);
  void tell_hooks();
  /// Sends `event` to the job; what the job decides at once waits in
  /// job_events_ for the next handle_job_events.
  void tell_job(const NodeEvent& event);
  /// Acts on the job's events in order, those that acting on them brings included.
  void handle_job_events();
  void on_job_event(JobEvent event);
  void check_deadlines();
  void check_stacks(Clock::time_point now);
  void begin_teardown(int sig);
  void kill_all();
  void announce_teardown(int sig);
  void say(const std::string& text, std::size_t lines = 1) { console_.write(1, text, lines); }
  void watch_progress(Clock::time_point now);

  void begin_hang_diagnosis();
  void finish_hang_diagnosis();
  HangReport local_hang_report(Clock::time_point now);
  void conclude_hang(HangReport report, const std::string& lead);
  void answer_places_asked();
  void finish_job_hang_diagnosis(JobPlaces job);
  bool begin_preemption(int sig, Clock::duration grace, PreemptionReport report = {});
  NodeSteps count_polling_ranks();
  void stop_polling_ranks(int sig, std::uint64_t stop_step, Clock::duration grace, PreemptionReport report);
  void say_preemption(const PreemptionReport& report, const std::string& where,
                      const std::vector<std::string>& passed, Clock::duration grace);
  bool ask_job_to_preempt(int sig);
  void follow_job_preemption(Clock::time_point now);
  void apply_job_stop(const JobStop& stop);
  bool echo_of_job_preemption();

  const LaunchPlan& plan_;
  SupervisorHooks* hooks_ = nullptr;
  bool hooks_told_ = false;
  std::deque<JobEvent> job_events_; ///< the job's events not yet acted on
  RunOutcome out_;
  Clock::time_point start_;
  RankTable ranks_;
  Console console_;
  Teardown teardown_;
  HangClock hang_;
  RankOutput output_;
  StdinRelay stdin_;
  Exits exits_;
  StackDumps stacks_;
  Stragglers stragglers_;
  RankSpawn spawn_;
  /// Step counting and the diagnosis of hangs and stragglers (core/run/progress_watch.hpp).
  ProgressWatch progress_;
  WarmStart* warm_ = nullptr;
  SignalGuard* signals_ = nullptr;
  std::unique_ptr<Containment> containment_;
  std::optional<Clock::time_point> timeout_deadline_;
  /// Across nodes (SupervisorHooks::job_wide_hangs): this node's ranks' places
  /// from its latest diagnosis, sent to node 0; whether that diagnosis was
  /// node 0's question rather than this node's quiet; and, with --on-hang
  /// stop, when this node stops on its own if node 0 never decides.
  std::vector<HangRank> local_places_;
  bool hang_asked_ = false;
  std::optional<Clock::time_point> hang_verdict_deadline_;
  /// A preemption signal that went to node 0 (SupervisorHooks::job_wide_preemption)
  /// while it picks the job's stop step: the signal, when it came, and when
  /// this node stops on its own step if node 0 has not answered.
  struct PendingPreemption {
    int signal = 0;
    Clock::time_point at{};
    Clock::time_point give_up{};
  };
  std::optional<PendingPreemption> preempt_pending_;
  /// This node's own preemption signal has been seen (it asked node 0, or
  /// the job's stop came first and the signal after it): the next one is a
  /// second signal, which kills at once.
  bool preempt_signal_seen_ = false;
};

RunOutcome Supervisor::run() {
  out_.started_at = std::chrono::system_clock::now();
  auto guard = SignalGuard::install();
  if (!guard) {
    out_.status = RunOutcome::Status::launch_failed;
    out_.reason = guard.error().message;
    finalize();
    return std::move(out_);
  }
  signals_ = guard->get();
  exits_.read_oom_baseline();
  if (output_.open_logs()) {
    start();
    while (!finished()) iterate();
    // Whatever the ranks left behind (background jobs, daemons that called
    // setsid) ends with the run, as the ranks' own groups did.
    const auto grace = teardown_.killed()
                           ? std::chrono::milliseconds(0)
                           : std::chrono::duration_cast<std::chrono::milliseconds>(plan_.grace_period);
    out_.leftover_processes = containment_->sweep(grace);
    output_.close_all();
    containment_.reset(); // while SIGPIPE is still ignored: it writes to the watchdog
  }
  console_.stop_live(); // before any report: the terminal is left as it was found
  stdin_.stop();
  tell_hooks();
  finalize();
  return std::move(out_);
} // the guard restores the signal mask and SIGPIPE here

/// Starts the ranks, with the containment that outlives them and the live area.
void Supervisor::start() {
  if (plan_.timeout) timeout_deadline_ = start_ + *plan_.timeout;
  raise_open_file_limit();
  Containment::Options containment;
  containment.grace = std::chrono::duration_cast<std::chrono::milliseconds>(plan_.grace_period);
  if (warm_ != nullptr && warm_->pid() > 0) containment.spared.push_back(warm_->pid());
  containment_ = Containment::start(containment);
  spawn_.spawn_all(progress_, *containment_, stdin_,
                   [this](RankState& r, const Error& e) { spawn_failed(r, e); });
  console_.start_live(ranks_.any_reads_stdin());
  live_tick();
}

/// One pass: wait for a descriptor or the next deadline, then give every
/// part its turn in an order that matters (see the comments).
void Supervisor::iterate() {
  PollSet set = poll_set();
  const int ready = ::poll(set.fds.data(), set.fds.size(), poll_timeout_ms(Clock::now()));
  if (ready < 0 && errno != EINTR) poll_failed();
  // Signals first: an interrupt decides how the exits that follow are read.
  if (ready > 0 && (set.fds[0].revents & POLLIN)) handle_signals();
  // Then other nodes: a remote failure that caused a local rank's exit (a
  // broken collective) must be judged before that exit is.
  if (hooks_) {
    // In the order the job gives them: its stop step before a failure read
    // in the same pass (node 0's own preemption ends with an abort right
    // behind its stopat).
    for (auto& event : hooks_->check(Clock::now())) job_events_.push_back(std::move(event));
    handle_job_events();
  }
  if (ready > 0) take_ready(set);
  reap(); // cheap, and catches exits whose SIGCHLD merged with another
  watch_progress(Clock::now());
  check_deadlines();
  // Again: a diagnosis that just began or ended here moves the job's on at once.
  if (hooks_) handle_job_events();
  tell_hooks();
  containment_->record_descendants();
  live_tick();
}

PollSet Supervisor::poll_set() {
  PollSet set;
  set.fds.push_back({signals_->fd(), POLLIN, 0});
  set.owners.emplace_back(nullptr, nullptr);
  output_.add_poll_fds(set.fds, set.owners);
  set.first_sink = set.fds.size();
  console_.add_poll_fds(set.fds);
  set.first_hook = set.fds.size();
  if (hooks_) {
    for (const int fd : hooks_->poll_fds()) set.fds.push_back({fd, POLLIN, 0});
  }
  set.stdin_index = set.fds.size();
  if (const auto entry = stdin_.poll_entry()) set.fds.push_back(*entry);
  return set;
}

int Supervisor::poll_timeout_ms(Clock::time_point now) const {
  int timeout_ms = -1;
  if (const auto deadline = next_deadline(now)) {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count();
    timeout_ms = static_cast<int>(std::clamp<long long>(wait, 0, 24LL * 3600 * 1000));
  }
  // Wake at least once a second even without a deadline: if a thread that a
  // library started (NVML, CUDA) has SIGCHLD unblocked, the kernel may hand
  // the signal to it and the signalfd never hears of an exit. The CLI blocks
  // the signals before any such thread exists; this bounds the damage anyway.
  if (timeout_ms < 0 || timeout_ms > k_max_poll_wait_ms) timeout_ms = k_max_poll_wait_ms;
  return timeout_ms;
}

/// After poll: the stdin relay, the console's writes, then the ranks' pipes.
void Supervisor::take_ready(PollSet& set) {
  if (set.stdin_index < set.fds.size() && set.fds[set.stdin_index].revents != 0)
    stdin_.forward(set.fds[set.stdin_index]);
  if (set.first_sink < set.first_hook) console_.flush();
  for (std::size_t i = 1; i < set.first_sink; ++i) {
    if (set.fds[i].revents == 0) continue;
    auto [rank, stream] = set.owners[i];
    if (output_.held_back(*rank, *stream)) continue; // an earlier read in this pass filled the console
    output_.read(*rank, *stream);
  }
}

/// poll only fails like this on EINVAL/ENOMEM; do not spin, give up politely.
void Supervisor::poll_failed() {
  if (!teardown_.active()) {
    out_.status = RunOutcome::Status::launch_failed;
    out_.reason = std::string("poll: ") + std::strerror(errno);
    begin_teardown(SIGTERM);
  } else if (!teardown_.killed()) {
    kill_all();
  }
}

std::optional<Clock::time_point> Supervisor::next_deadline(Clock::time_point now) const {
  Earliest next;
  if (!teardown_.active()) {
    next.consider(timeout_deadline_);
    next.consider(hang_.next_deadline());
  }
  next.consider(exits_.settle_deadline());
  next.consider(hang_verdict_deadline_);
  if (preempt_pending_) next.consider(preempt_pending_->give_up);
  next.consider(stacks_.next_deadline(now));
  bool all_quiet = true;
  for (const auto& r : ranks_) {
    if (r.running() || r.open()) all_quiet = false;
    if (r.reaped && r.open() && (!teardown_.active() || teardown_.killed()))
      next.consider(output_.drain_deadline(r));
  }
  next.consider(teardown_.next_deadline(now, all_quiet));
  if (hooks_) next.consider(hooks_->next_deadline());
  next.consider(console_.next_deadline());
  return next.get();
}

bool Supervisor::finished() const {
  if (exits_.settling()) return false; // the teardown has yet to signal the groups
  const auto now = Clock::now();
  for (const auto& r : ranks_) {
    if (r.running()) return false;
    // A rank's exit is what counts. Its pipes normally end with it; if they
    // are still open a while later, a background job of its holds them: that
    // job is a leftover like any other (the sweep after the loop ends it,
    // SIGTERM first, and counts it), not a reason to wait.
    if (r.open() && (!r.reaped || now < output_.drain_deadline(r))) return false;
  }
  // During teardown, wait for descendants to leave the groups (or for the
  // SIGKILL that ends the grace period), so none outlives air-run.
  return teardown_.groups_gone(ranks_);
}

void Supervisor::tell_hooks() {
  if (hooks_ == nullptr || hooks_told_ || out_.status == RunOutcome::Status::succeeded ||
      out_.remote_failure || exits_.settling())
    return; // nothing to tell yet, or the root cause is still provisional
  hooks_told_ = true;
  tell_job(NodeEvent::failed_with(out_));
}

void Supervisor::tell_job(const NodeEvent& event) {
  if (hooks_ == nullptr) return;
  for (auto& e : hooks_->tell(event, Clock::now())) job_events_.push_back(std::move(e));
}

void Supervisor::handle_job_events() {
  while (!job_events_.empty()) {
    JobEvent event = std::move(job_events_.front());
    job_events_.pop_front();
    on_job_event(std::move(event));
  }
  follow_job_preemption(Clock::now());
}

void Supervisor::on_job_event(JobEvent event) {
  switch (event.kind) {
  case JobEvent::Kind::counts_asked:
    tell_job(NodeEvent::counted_steps(count_polling_ranks()));
    break;
  case JobEvent::Kind::stop:
    apply_job_stop(event.stop);
    break;
  case JobEvent::Kind::failed:
    // A fallback stop step that is due comes first, as it did before the failure was read.
    follow_job_preemption(Clock::now());
    stop_for_remote(std::move(event.failure));
    break;
  case JobEvent::Kind::places_asked:
    answer_places_asked();
    break;
  case JobEvent::Kind::places:
    finish_job_hang_diagnosis(std::move(event.places));
    break;
  }
}

void Supervisor::stop_for_remote(RemoteFailure failure) {
  // This node already failed on its own, unless all it has is a rank that lost
  // its peer: then the other node's failure is the likelier cause.
  if (out_.status != RunOutcome::Status::succeeded && !exits_.settling()) return;
  out_.status = failure.hung ? RunOutcome::Status::hung : RunOutcome::Status::failed;
  out_.root_cause_rank = -1;
  out_.reason = remote_failure_reason(failure);
  out_.remote_failure = std::move(failure);
  begin_teardown(SIGTERM);
}

void Supervisor::handle_signals() {
  for (const int sig : signals_->read_pending()) {
    if (sig == SIGCHLD) continue; // reap() runs every iteration
    if (sig == SIGWINCH) {
      spawn_.resize_terminals();
      continue;
    }
    switch (signal_action(sig, plan_.forwarded_signals)) {
    case SignalAction::ignore:
      break;
    case SignalAction::stacks:
      // Ctrl-\ (the ranks are in their own groups, so only air-run gets it):
      // print every armed Python rank's stacks and carry on.
      if (!teardown_.active() && !stacks_.waiting() && !stacks_.request(StackPurpose::show, Clock::now()))
        say("air-run: no Python rank can show its stack (" + signal_name(sig) + " ignored)\n");
      break;
    case SignalAction::forward:
      // Schedulers (Slurm --signal) send these as warnings: ranks that call
      // air.should_stop() are asked to stop at one step (preemption); the
      // others get the signal passed on.
      if ((sig == SIGUSR1 || sig == SIGUSR2) && echo_of_job_preemption()) break;
      if ((sig == SIGUSR1 || sig == SIGUSR2) && !teardown_.active() &&
          out_.status == RunOutcome::Status::succeeded &&
          (preempt_pending_ || ask_job_to_preempt(sig) || begin_preemption(sig, plan_.grace_period)))
        break;
      for (auto& r : ranks_)
        if (r.running()) signal_group(r.pid, sig);
      break;
    case SignalAction::teardown:
      if (sig == SIGTERM && echo_of_job_preemption()) {
        // the job stops for it already, at its step
      } else if (teardown_.active()) {
        // A second interrupt means "now": skip the rest of the grace period.
        if (!teardown_.killed()) {
          out_.kill_requested = true;
          kill_all();
        }
      } else if (preempt_pending_) {
        // A second signal while node 0 decides means "now", as during a
        // grace period: this node's ranks stop here, at once.
        const int first = preempt_pending_->signal;
        preempt_pending_.reset();
        if (!begin_preemption(first, plan_.grace_period)) interrupt(first);
        out_.kill_requested = true;
        kill_all();
      } else if (exits_.settling()) {
        begin_teardown(sig); // a rank already failed: that stays the outcome
      } else if (sig == SIGTERM && (ask_job_to_preempt(sig) || begin_preemption(sig, plan_.grace_period))) {
        // the ranks that ask stop at one step (the job's, when node 0 picks
        // it); the others got SIGTERM
      } else {
        interrupt(sig);
      }
      break;
    }
  }
}

/// Whether a preemption signal is this node's own copy of the signal the job already
/// stops for (a SIGTERM to every node: node 0's stopat may come before this
/// node reads its own signal): it is this node's first, not a second one
/// that means "now". The first such signal only.
bool Supervisor::echo_of_job_preemption() {
  if (preempt_signal_seen_ || out_.status != RunOutcome::Status::preempted || !out_.preemption ||
      !out_.preemption->job_wide)
    return false;
  preempt_signal_seen_ = true;
  return true;
}

void Supervisor::interrupt(int sig) {
  out_.status = RunOutcome::Status::interrupted;
  out_.interrupt_signal = sig;
  out_.reason = "interrupted by " + signal_name(sig);
  announce_teardown(sig);
  begin_teardown(sig);
}

/// Reaps what has exited, then judges the exits, all collected first.
void Supervisor::reap() {
  for (RankState* r : exits_.reap(containment_.get(), stdin_)) on_rank_ended(*r);
}

void Supervisor::on_rank_ended(RankState& r) {
  RankOutcome& o = out_.ranks[r.index];
  if (o.status.success() || o.stopped_by_air_run) return;
  if (teardown_.active() || (out_.status != RunOutcome::Status::succeeded && !exits_.settling())) return;
  // Its last lines may still be in its pipes: they tell a lost peer apart.
  output_.drain_ready(r);
  std::string reason = exits_.failure_reason(o);
  fail(r, std::move(reason), reports_lost_peer(o.tail));
}

void Supervisor::spawn_failed(RankState& r, const Error& e) {
  if (e.kind == ErrorKind::not_found || e.kind == ErrorKind::not_executable) {
    // The rank never ran: it is a failed rank with the shell's code.
    exits_.never_ran(r, e.kind == ErrorKind::not_found ? 127 : 126, e.message);
    fail(r, "rank " + std::to_string(r.plan->rank) + " could not be started: " + e.message, false);
  } else {
    out_.status = RunOutcome::Status::launch_failed;
    out_.reason = "rank " + std::to_string(r.plan->rank) + ": " + e.message;
    begin_teardown(SIGTERM);
  }
}

void Supervisor::fail(RankState& r, std::string reason, bool lost_peer) {
  if (exits_.fail(r, std::move(reason), lost_peer, Clock::now())) begin_teardown(SIGTERM);
}

void Supervisor::check_deadlines() {
  const auto now = Clock::now();
  if (exits_.settle_due(now)) begin_teardown(SIGTERM);
  if (!teardown_.active() && out_.status == RunOutcome::Status::succeeded && timeout_deadline_ &&
      now >= *timeout_deadline_) {
    out_.status = RunOutcome::Status::timed_out;
    out_.reason = "timed out after " + format_duration(*plan_.timeout);
    // Where was each rank stuck? Ask before stopping them.
    if (!stacks_.request(StackPurpose::timeout, Clock::now())) begin_teardown(SIGTERM);
  }
  if (!teardown_.active() && out_.status == RunOutcome::Status::succeeded && hang_.due(now) &&
      !stacks_.waiting()) {
    begin_hang_diagnosis();
    tell_job(NodeEvent::quiet_ranks());
  }
  if (hang_verdict_deadline_ && now >= *hang_verdict_deadline_) {
    hang_verdict_deadline_.reset();
    // Node 0 never decided (an older agent, or no --hang-timeout there): stop as one node would.
    if (hang_.diagnosed() && out_.hang && !teardown_.active() && out_.status == RunOutcome::Status::succeeded)
      conclude_hang(std::move(*out_.hang), {});
  }
  check_stacks(now);
  if (teardown_.kill_due(now)) kill_all();
}

/// Once the awaited stack dumps are in (or their wait is over): shows them
/// (Ctrl-\), or goes on with what asked for them.
void Supervisor::check_stacks(Clock::time_point now) {
  if (!stacks_.due(now, progress_.flight_recorder_answered())) return;
  const StackPurpose purpose = stacks_.purpose();
  console_.write(stacks_.collect(out_, Clock::now()));
  if (purpose == StackPurpose::timeout) begin_teardown(SIGTERM);
  if (purpose == StackPurpose::hang) finish_hang_diagnosis();
}

void Supervisor::begin_teardown(int sig) {
  if (teardown_.active()) return;
  exits_.settled();
  teardown_.begin(sig, ranks_, containment_.get(), Clock::now());
}

void Supervisor::kill_all() { teardown_.kill(ranks_, out_, containment_.get(), Clock::now()); }

/// Says at once what the teardown will do and how to cut it short.
void Supervisor::announce_teardown(int sig) {
  if (console_.options().quiet) return;
  const std::size_t running = ranks_.running();
  if (running == 0) return;
  say(teardown_notice(running, sig, plan_.grace_period));
}

/// Reads the ranks' progress pages: a step is progress (no hang), and every
/// few seconds the step times say whether a rank is a straggler.
void Supervisor::watch_progress(Clock::time_point now) {
  if (progress_.poll(now)) hang_.progress(now);
  if (teardown_.active()) return;
  const ConsoleBatch batch = stragglers_.tick(progress_, now);
  if (!console_.options().quiet) console_.write(batch);
}

/// No rank made progress for --hang-timeout: ask the ranks for their stacks
/// and Flight Recorder traces; finish_hang_diagnosis reads them.
void Supervisor::begin_hang_diagnosis() {
  hang_.diagnosing();
  progress_.request_flight_recorder();
  // Stacks already asked for (Ctrl-\\, a timeout) keep their purpose: go on without.
  if (stacks_.waiting() || !stacks_.request(StackPurpose::hang, Clock::now())) finish_hang_diagnosis();
}

/// Across nodes: answers node 0's question for this node's places, from the
/// diagnosis of this quiet spell, or a new one.
void Supervisor::answer_places_asked() {
  if (stacks_.waiting() && stacks_.purpose() == StackPurpose::hang) {
    // finish_hang_diagnosis answers
  } else if (hang_.diagnosed() && !local_places_.empty()) {
    tell_job(NodeEvent::placed_ranks(local_places_));
  } else {
    hang_asked_ = true;
    begin_hang_diagnosis();
  }
}

/// This node's ranks' places at `now`: each one's collective (from its
/// progress page), its stack's user frame and its Flight Recorder dump.
HangReport Supervisor::local_hang_report(Clock::time_point now) {
  const auto wall_now = std::chrono::system_clock::now();
  const std::int64_t mono_now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  HangReport report;
  report.quiet_s = hang_.quiet_s(now);
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
void Supervisor::finish_hang_diagnosis() {
  const auto now = Clock::now();
  HangReport report = local_hang_report(now);
  report.diagnosis = diagnose_hang(report.ranks);
  const std::string quiet =
      format_duration(std::chrono::duration_cast<Millis>(std::chrono::duration<double>(report.quiet_s)));
  local_places_ = report.ranks;
  const bool asked = std::exchange(hang_asked_, false);
  if (hooks_ && hooks_->job_wide_hangs()) {
    // Node 0 names the job's laggards and decides; this node's picture goes
    // to it, to this node's console and to its summary.
    tell_job(NodeEvent::placed_ranks(report.ranks));
    std::string batch =
        asked ? "air-run: node 0 asks where this node's ranks are: " + report.diagnosis.line + "\n"
              : "air-run: no progress on this node for " + quiet +
                    " (no step, no output): " + report.diagnosis.line + "\n" +
                    "air-run: node 0 names the job's laggards from every node's ranks\n";
    say(batch, asked ? 1 : 2);
    if (!asked && plan_.stop_on_hang) hang_verdict_deadline_ = now + k_job_hang_verdict_wait;
    out_.hang = std::move(report);
    return;
  }
  conclude_hang(std::move(report), "air-run: no progress for " + quiet + " (no step, no output): ");
}

/// Node 0, across nodes: the nodes' places are in; names the job's laggards
/// with the same rules, prints the job's diagnosis and records it (laggards
/// as global ranks); with --on-hang stop, ends the run, and with it the job
/// (the control channel tells the others with `hung`).
void Supervisor::finish_job_hang_diagnosis(JobPlaces job) {
  if (!plan_.hang_timeout) return; // another node's --hang-timeout: this one watches none
  const auto now = Clock::now();
  HangReport report;
  report.at = std::chrono::system_clock::now();
  // At least one node was quiet for --hang-timeout; node 0's own ranks maybe longer.
  report.quiet_s = std::max(std::chrono::duration<double>(*plan_.hang_timeout).count(),
                            hang_.diagnosed() ? hang_.quiet_s(now) : 0.0);
  if (out_.hang) report.flight_recorder_files = out_.hang->flight_recorder_files;
  report.diagnosis = diagnose_job_hang(job);
  report.ranks = std::move(job.ranks);
  const std::string quiet =
      format_duration(std::chrono::duration_cast<Millis>(std::chrono::duration<double>(report.quiet_s)));
  conclude_hang(std::move(report), "air-run: the job, across the nodes: no progress for " + quiet + ": ");
}

/// Prints a diagnosis (`lead` starts its line; none: only the verdict's line)
/// and records it; with --on-hang stop, ends the run with status hung.
void Supervisor::conclude_hang(HangReport report, const std::string& lead) {
  const bool stop = plan_.stop_on_hang && plan_.hang_timeout;
  hang_verdict_deadline_.reset(); // decided
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
  say(batch, lines);
  out_.hang = std::move(report);
  if (stop && !teardown_.active() && out_.status == RunOutcome::Status::succeeded) {
    out_.status = RunOutcome::Status::hung;
    out_.reason = "hung: no progress for " + format_duration(*plan_.hang_timeout);
    if (!out_.hang->diagnosis.laggards.empty())
      out_.reason += "; the others wait for rank" +
                     std::string(out_.hang->diagnosis.laggards.size() > 1 ? "s " : " ") +
                     rank_words(out_.hang->diagnosis.laggards);
    begin_teardown(SIGTERM);
  }
}

/// A preemption signal (SIGTERM from a scheduler or a spot notice) while
/// some ranks call air.should_stop(): instead of stopping them mid-step,
/// air-run picks one step that no rank has passed and asks each of them to
/// stop there, saving what it must within `grace`; ranks that never ask get
/// the signal at once. Returns false when no running rank asks (the usual
/// teardown follows). One node's own decision: across nodes node 0 decides
/// (ask_job_to_preempt), and this is the fallback when it does not answer.
bool Supervisor::begin_preemption(int sig, Clock::duration grace, PreemptionReport report) {
  const NodeSteps mine = count_polling_ranks();
  if (mine.polling == 0) return false;
  // Every polling rank is at most at mine.steps and the request is in its
  // page at once: the next step is one none has passed. A rank that never
  // counted a step stops at its next question.
  stop_polling_ranks(sig, mine.steps == 0 ? 0 : mine.steps + 1, grace, std::move(report));
  return true;
}

/// This node's running ranks that call air.should_stop(): how many, the
/// furthest one's step count and the fastest one's step rate, read now.
NodeSteps Supervisor::count_polling_ranks() {
  progress_.poll(Clock::now());
  NodeSteps mine;
  for (const auto& r : ranks_) {
    if (!r.running() || !progress_.reading(r.index).polls_stop) continue;
    ++mine.polling;
    mine.steps = std::max(mine.steps, progress_.reading(r.index).steps);
    mine.rate = std::max(mine.rate, progress_.rank_rate(r.index));
  }
  return mine;
}

/// Asks this node's polling ranks to stop at `stop_step` (0: at their next
/// should_stop()) within `grace`, signals the others at once, and ends the
/// run as preempted by `sig`. `report` brings what the job decided, if it did.
void Supervisor::stop_polling_ranks(int sig, std::uint64_t stop_step, Clock::duration grace,
                                    PreemptionReport report) {
  progress_.poll(Clock::now());
  if (grace < Clock::duration::zero()) grace = Clock::duration::zero();
  report.signal = sig;
  report.stop_step = stop_step;
  report.deadline_s = std::chrono::duration<double>(grace).count();
  const auto deadline = std::chrono::system_clock::now() + grace;
  const std::int64_t deadline_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  exits_.settled();
  preempt_pending_.reset();
  teardown_.begin_quietly(grace, Clock::now());
  std::vector<std::string> passed; // ranks already past a step the job chose elsewhere
  for (auto& r : ranks_) {
    if (!r.running() || !progress_.reading(r.index).polls_stop) continue;
    progress_.request_stop(r.index, stop_step, deadline_ns);
    r.teardown_signal = sig;
    report.polling_ranks.push_back(r.plan->rank);
    const std::uint64_t steps = progress_.reading(r.index).steps;
    if (stop_step > 0 && steps >= stop_step)
      passed.push_back("rank " + std::to_string(r.plan->rank) + " is at step " + std::to_string(steps));
  }
  for (auto& r : ranks_) {
    if (!r.running() || r.teardown_signal != 0) continue;
    r.teardown_signal = sig;
    signal_group(r.pid, sig);
    report.signalled_ranks.push_back(r.plan->rank);
  }
  const std::string step_words =
      stop_step > 0 ? "step " + std::to_string(stop_step) : std::string("their next should_stop()");
  const std::string where = report.job_wide && report.signal_node >= 0
                                ? " on node " + std::to_string(report.signal_node)
                                : std::string();
  out_.status = RunOutcome::Status::preempted;
  out_.interrupt_signal = sig;
  out_.reason = "preempted by " + signal_name(sig) + where + "; " +
                (report.job_wide ? "every node's ranks stop at " : "ranks stop at ") + step_words;
  say_preemption(report, where, passed, grace);
  out_.preemption = std::move(report);
}

/// The preemption's lines: which ranks stop where, within what time.
void Supervisor::say_preemption(const PreemptionReport& report, const std::string& where,
                                const std::vector<std::string>& passed, Clock::duration grace) {
  const int sig = report.signal;
  const std::uint64_t stop_step = report.stop_step;
  if (!console_.options().quiet) {
    std::string lines;
    if (!report.polling_ranks.empty())
      lines += "air-run: " + signal_name(sig) + where + ": asking rank" +
               (report.polling_ranks.size() > 1 ? "s " : " ") + rank_words(report.polling_ranks) +
               " to stop" + (stop_step > 0 ? " at step " + std::to_string(stop_step) : std::string()) +
               (report.job_wide ? " (the job's, from node 0)" : "") + ", up to " +
               format_duration(std::chrono::duration_cast<Millis>(grace)) + "; Ctrl-C again to kill now\n";
    for (const auto& p : passed)
      lines += "air-run: " + p + ", past the job's stop step: it stops at its next should_stop()\n";
    if (!lines.empty()) say(lines, 1 + passed.size());
  }
}

/// Across nodes: a preemption signal here goes to node 0, which picks one
/// stop step for the job (follow_job_preemption applies it). Returns false
/// when this node decides alone: one node, or none of its ranks polls.
bool Supervisor::ask_job_to_preempt(int sig) {
  if (hooks_ == nullptr || !hooks_->job_wide_preemption()) return false;
  const NodeSteps mine = count_polling_ranks();
  if (mine.polling == 0) return false;
  const auto now = Clock::now();
  preempt_signal_seen_ = true;
  preempt_pending_ = PendingPreemption{sig, now, now + k_preempt_decision_wait};
  tell_job(NodeEvent::preempted_by(
      sig, mine, std::chrono::duration_cast<std::chrono::milliseconds>(plan_.grace_period)));
  if (!console_.options().quiet) {
    const std::string line = "air-run: " + signal_name(sig) +
                             ": agreeing on one stop step with the other nodes (node 0 picks it)\n";
    say(line, 1);
  }
  return true;
}

/// Every pass, across nodes, once the job's events are acted on (its stop
/// step among them): falls back to this node's own step when node 0 stays
/// silent past k_preempt_decision_wait.
void Supervisor::follow_job_preemption(Clock::time_point now) {
  if (!preempt_pending_) return;
  if (teardown_.active() || out_.status != RunOutcome::Status::succeeded) {
    preempt_pending_.reset(); // the run ends otherwise (a failure here or elsewhere)
    return;
  }
  if (now < preempt_pending_->give_up) return;
  const PendingPreemption pending = *preempt_pending_;
  preempt_pending_.reset();
  if (!console_.options().quiet) {
    const std::string line =
        "air-run: node 0 did not pick a stop step within " + format_duration(k_preempt_decision_wait) +
        ": this node's ranks stop at a step of its own, which other nodes may not share\n";
    say(line, 1);
  }
  PreemptionReport report;
  report.fallback = true;
  if (!begin_preemption(pending.signal, pending.at + plan_.grace_period - now, std::move(report)))
    interrupt(pending.signal);
}

/// Node 0's decision, on every node: this node's polling ranks stop at the
/// job's step, within what is left of the grace period of the first signal
/// (of this node's own signal, when that ends sooner).
void Supervisor::apply_job_stop(const JobStop& stop) {
  const auto now = Clock::now();
  std::optional<PendingPreemption> pending = std::exchange(preempt_pending_, std::nullopt);
  if (teardown_.active() || out_.status != RunOutcome::Status::succeeded) return; // ending otherwise already
  Clock::duration grace = stop.grace;
  if (pending) grace = std::min(grace, pending->at + plan_.grace_period - now);
  if (!stop.missing_nodes.empty() && !console_.options().quiet) {
    const std::string line = std::string("air-run: ") +
                             (stop.missing_nodes.size() == 1 ? "node " : "nodes ") +
                             rank_words(stop.missing_nodes) + " sent no step count within " +
                             format_duration(k_preempt_counts_wait) + ": the stop step was picked without " +
                             (stop.missing_nodes.size() == 1 ? "it" : "them") + "\n";
    say(line, 1);
  }
  PreemptionReport report;
  report.job_wide = true;
  report.signal_node = stop.node;
  report.missing_nodes = stop.missing_nodes;
  stop_polling_ranks(stop.signal, stop.stop_step, grace, std::move(report));
}

void Supervisor::finalize() {
  out_.ended_at = std::chrono::system_clock::now();
  out_.duration_s = seconds_between(start_, Clock::now());
  const auto now = Clock::now();
  for (auto& r : ranks_) {
    RankOutcome& o = out_.ranks[r.index];
    if (r.reaped) o.duration_s = seconds_between(r.started, r.reaped_at);
    if (o.last_output_at && o.last_output_age_s < 0)
      o.last_output_age_s = seconds_between(*o.last_output_at, r.reaped ? r.reaped_at : now);
  }
  progress_.poll(now);
  for (auto& r : ranks_)
    if (progress_.reading(r.index).attached) out_.ranks[r.index].steps = progress_.reading(r.index).steps;
  stragglers_.finish(progress_);
  out_.stragglers = progress_.stragglers();
  // Bounded: a console nobody reads must not keep air-run from reporting.
  out_.console_lines_dropped = console_.finish(k_console_stall_ms);
}

LiveSnapshot Supervisor::live_snapshot(Clock::time_point now) const {
  LiveSnapshot s;
  for (const auto& r : ranks_) {
    if (r.running()) {
      ++s.running;
    } else if (r.reaped) {
      if (out_.ranks[r.index].status.success())
        ++s.exited;
      else
        ++s.failed;
    }
  }
  s.elapsed_s = seconds_between(start_, now);
  s.steps = progress_.median_steps();
  if (s.steps) s.steps_per_s = progress_.step_rate();
  if (teardown_.active() && !teardown_.killed())
    s.stopping_s = std::max(0.0, seconds_between(now, teardown_.grace_deadline()));
  else if (timeout_deadline_ && !teardown_.active())
    s.left_s = std::max(0.0, seconds_between(now, *timeout_deadline_));
  return s;
}

} // namespace

RunOutcome supervise(const LaunchPlan& plan, const ConsoleOptions& console, SupervisorHooks* hooks,
                     WarmStart* warm) {
  Supervisor supervisor(plan, console, hooks, warm);
  return supervisor.run();
}

} // namespace air
