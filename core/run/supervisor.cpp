// The supervisor: one single-threaded event loop, ninja-style, over the
// parts of a run that each own their state, say when they next need a look
// and get a turn every pass (core/run/rank_table.hpp and its neighbours).
#include "core/run/supervisor.hpp"

#include "core/base/duration.hpp"
#include "core/base/phase_clock.hpp"
#include "core/os/containment.hpp"
#include "core/os/process.hpp"
#include "core/os/signals.hpp"
#include "core/run/console.hpp"
#include "core/run/exits.hpp"
#include "core/run/hang_watch.hpp"
#include "core/run/lost_peer.hpp"
#include "core/run/output/rank_output.hpp"
#include "core/run/preemption.hpp"
#include "core/run/progress_watch.hpp"
#include "core/run/rank_spawn.hpp"
#include "core/run/rank_table.hpp"
#include "core/run/signal_actions.hpp"
#include "core/run/stack_dumps.hpp"
#include "core/run/stdin_relay.hpp"
#include "core/run/stop_signals.hpp"
#include "core/run/stragglers.hpp"
#include "core/run/teardown.hpp"
#include "core/run/timeline_recorder.hpp"
#include "core/warm/warm_start.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int k_max_poll_wait_ms = 1000;
/// At the end, how long the console may take nothing before the rest of
/// air-run's buffered echo is dropped (counted in console_lines_dropped).
constexpr int k_console_stall_ms = 1000;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
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
  std::size_t readers_index = 0; ///< the pipe readers' "a pipe ended", when they run
  std::size_t stdin_index = 0;
};

class Supervisor {
public:
  Supervisor(const LaunchPlan& plan, const ConsoleOptions& console, SupervisorHooks* hooks, WarmStart* warm)
      : plan_(plan), hooks_(hooks), start_(Clock::now()), ranks_(plan, console, out_), console_(console),
        teardown_(plan.grace_period), progress_(ranks_.size()), stacks_(ranks_, plan.stack_signal),
        exits_(ranks_, out_),
        hang_(
            plan, ranks_, out_, console_, progress_, stacks_, teardown_, hooks,
            [this](const NodeEvent& e) { tell_job(e); }, [this] { begin_teardown(SIGTERM); }, start_),
        output_(plan, ranks_, console_, out_, teardown_, hang_.clock()), stragglers_(ranks_),
        timeline_(ranks_, plan.node_rank, plan.attempt), spawn_(ranks_, out_, console_, warm, plan.timeout),
        preemption_(
            plan, ranks_, out_, console_, progress_, teardown_, exits_, hooks,
            [this](const NodeEvent& e) { tell_job(e); }, [this](int sig) { interrupt(sig); }),
        warm_(warm) {}

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
  void say(const std::string& text, std::size_t lines = 1) { console_.say(text, lines); }
  void watch_progress(Clock::time_point now);
  void say_lost_progress();

  bool preempt(int sig);
  void on_interrupt(int sig);

  const LaunchPlan& plan_;
  SupervisorHooks* hooks_ = nullptr;
  bool hooks_told_ = false;
  std::deque<JobEvent> job_events_; ///< the job's events not yet acted on
  RunOutcome out_;
  Clock::time_point start_;
  // The parts, each with its own state, in the order they are made: a
  // part may hold references to those above it.
  RankTable ranks_;
  Console console_;
  Teardown teardown_;
  /// Step counting and the diagnosis of hangs and stragglers (core/run/progress_watch.hpp).
  ProgressWatch progress_;
  StackDumps stacks_;
  Exits exits_;
  HangWatch hang_;
  RankOutput output_;
  StdinRelay stdin_;
  Stragglers stragglers_;
  /// The bounded series the HTML page draws (core/run/timeline_recorder.hpp).
  TimelineRecorder timeline_;
  RankSpawn spawn_;
  Preemption preemption_;
  StopSignals stop_signals_;
  WarmStart* warm_ = nullptr;
  SignalGuard* signals_ = nullptr;
  std::unique_ptr<Containment> containment_;
  std::optional<Clock::time_point> timeout_deadline_;
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
  // Held but while the loop waits in poll: the pipe readers hand on what
  // they read then, never while the loop works (core/run/output/pipe_readers.hpp).
  std::unique_lock<std::mutex> held(output_.lock());
  exits_.read_oom_baseline();
  phases::mark("signals");
  if (output_.open_logs()) {
    phases::mark("logs");
    start();
    while (!finished()) iterate();
    phases::mark("ranks");
    // Whatever the ranks left behind (background jobs, daemons that called
    // setsid) ends with the run, as the ranks' own groups did.
    const auto grace = teardown_.killed()
                           ? std::chrono::milliseconds(0)
                           : std::chrono::duration_cast<std::chrono::milliseconds>(plan_.grace_period);
    out_.leftover_processes = containment_->sweep(grace);
    out_.leftover_names = containment_->swept();
    phases::mark("sweep");
    output_.close_all();  // the pipe readers end here
    containment_.reset(); // while SIGPIPE is still ignored: it writes to the watchdog
    phases::mark("containment-end");
  }
  console_.stop_live(); // before any report: the terminal is left as it was found
  stdin_.stop();
  tell_hooks();
  finalize();
  phases::mark("finalize");
  return std::move(out_);
} // the guard restores the signal mask and SIGPIPE here

/// Starts the ranks, with the containment that outlives them and the live area.
void Supervisor::start() {
  if (plan_.timeout) timeout_deadline_ = start_ + *plan_.timeout;
  raise_open_file_limit();
  Containment::Options containment;
  containment.grace = std::chrono::duration_cast<std::chrono::milliseconds>(plan_.grace_period);
  if (warm_ != nullptr && warm_->pid() > 0) containment.spared.push_back(warm_->pid());
  if (plan_.run_dir_is_temporary) containment.private_dir = plan_.run_dir;
  containment_ = Containment::start(containment);
  exits_.watch_run_cgroup(containment_->cgroup_dir());
  phases::mark("containment");
  if (hooks_) {
    // The other nodes' heartbeats go on while the warm interpreter imports;
    // what the job says meanwhile waits for the first pass.
    spawn_.while_waiting([this] {
      for (auto& event : hooks_->check(Clock::now())) job_events_.push_back(std::move(event));
    });
  }
  stacks_.clear_files(); // an attempt's ranks arm afresh: no file of the one before passes for armed
  spawn_.spawn_all(progress_, *containment_, stdin_,
                   [this](RankState& r, const Error& e) { spawn_failed(r, e); });
  phases::mark("spawn");
  console_.start_live(ranks_.any_reads_stdin());
  live_tick();
}

/// One pass: wait for a descriptor or the next deadline, then give every
/// part its turn in an order that matters (see the comments).
void Supervisor::iterate() {
  PollSet set = poll_set();
  const int timeout_ms = poll_timeout_ms(Clock::now());
  output_.lock().unlock(); // the pipe readers' turn
  const int ready = ::poll(set.fds.data(), set.fds.size(), timeout_ms);
  const int poll_errno = errno;
  output_.lock().lock();
  errno = poll_errno;
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
  set.readers_index = set.fds.size();
  if (const int fd = output_.readers_ended_fd(); fd >= 0) set.fds.push_back({fd, POLLIN, 0});
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
  if (set.readers_index < set.stdin_index && set.fds[set.readers_index].revents != 0)
    output_.clear_readers_ended(); // a pipe ended: the loop checks whether the run is over
  console_.begin_batch();          // the pass's lines for the live area's terminal in one write
  for (std::size_t i = 1; i < set.first_sink; ++i) {
    if (set.fds[i].revents == 0) continue;
    auto [rank, stream] = set.owners[i];
    if (output_.held_back(*rank, *stream)) continue; // an earlier read in this pass filled the console
    output_.read(*rank, *stream);
  }
  console_.end_batch();
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
  if (!teardown_.active()) next.consider(timeout_deadline_);
  next.consider(hang_.next_deadline(teardown_.active()));
  next.consider(exits_.settle_deadline());
  next.consider(preemption_.next_deadline());
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
  preemption_.follow_job(Clock::now());
}

void Supervisor::on_job_event(JobEvent event) {
  switch (event.kind) {
  case JobEvent::Kind::counts_asked:
    tell_job(NodeEvent::counted_steps(preemption_.count_polling_ranks()));
    break;
  case JobEvent::Kind::stop:
    preemption_.apply_job_stop(event.stop);
    break;
  case JobEvent::Kind::failed:
    // A fallback stop step that is due comes first, as it did before the failure was read.
    preemption_.follow_job(Clock::now());
    stop_for_remote(std::move(event.failure));
    break;
  case JobEvent::Kind::places_asked:
    hang_.answer_places_asked();
    break;
  case JobEvent::Kind::places:
    hang_.finish_job(std::move(event.places));
    break;
  case JobEvent::Kind::not_hung:
    hang_.job_not_hung();
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
      console_.resized();
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
      // others get the signal passed on. Once a stop is on, one more warning
      // (srun's copy, the next one) changes nothing.
      if (is_warning_signal(sig) && stop_signals_.heard()) {
        stop_signals_.hear(sig, Clock::now());
        break;
      }
      if (is_warning_signal(sig) && preemption_.echo_of_job_preemption()) {
        stop_signals_.hear(sig, Clock::now());
        break;
      }
      if (is_warning_signal(sig) && !teardown_.active() && out_.status == RunOutcome::Status::succeeded &&
          (preemption_.pending() || preempt(sig))) {
        stop_signals_.hear(sig, Clock::now());
        break;
      }
      for (auto& r : ranks_)
        if (r.running()) signal_group(r.pid, sig);
      break;
    case SignalAction::teardown:
      on_interrupt(sig);
      break;
    }
  }
}

/// SIGTERM, SIGINT or SIGHUP. Signals of one burst (slurmd's SIGTERM,
/// SIGCONT, SIGTERM; a wrapper's copy) are one request (StopSignals); a
/// second one later means "now".
void Supervisor::on_interrupt(int sig) {
  if (sig == SIGTERM && preemption_.echo_of_job_preemption()) {
    stop_signals_.hear(sig, Clock::now()); // the job stops for it already, at its step
    return;
  }
  const StopVerdict verdict = stop_signals_.hear(sig, Clock::now());
  if (verdict == StopVerdict::same || verdict == StopVerdict::follows) return; // one request
  if (teardown_.active()) {
    // A second interrupt means "now": skip the rest of the grace period.
    if (!teardown_.killed()) {
      out_.kill_requested = true;
      kill_all();
    }
  } else if (preemption_.pending()) {
    // A second signal while node 0 decides means "now", as during a
    // grace period: this node's ranks stop here, at once.
    const int first = preemption_.take_pending();
    if (!preemption_.begin(first, plan_.grace_period)) interrupt(first);
    out_.kill_requested = true;
    kill_all();
  } else if (exits_.settling()) {
    begin_teardown(sig); // a rank already failed: that stays the outcome
  } else if (sig == SIGTERM && preempt(sig)) {
    // the ranks that ask stop at one step (the job's, when node 0 picks
    // it); the others got SIGTERM
  } else {
    interrupt(sig);
  }
}

void Supervisor::interrupt(int sig) {
  out_.status = RunOutcome::Status::interrupted;
  out_.interrupt_signal = sig;
  out_.reason = "interrupted by " + signal_name(sig);
  announce_teardown(sig);
  begin_teardown(sig);
}

/// A preemption signal: node 0 picks the step across nodes, else this node
/// does; false when no rank here polls (the signal then ends the run as usual).
bool Supervisor::preempt(int sig) {
  timeline_.mark_preempted(Clock::now());
  return preemption_.ask_job(sig) || preemption_.begin(sig, plan_.grace_period);
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
  std::string reason = exits_.failure_reason(o, r.plan->error_file);
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
  if (exits_.settle_due(now, hooks_ != nullptr && hooks_->others_may_tell())) begin_teardown(SIGTERM);
  if (!teardown_.active() && out_.status == RunOutcome::Status::succeeded && timeout_deadline_ &&
      now >= *timeout_deadline_) {
    out_.status = RunOutcome::Status::timed_out;
    out_.reason = "timed out after " + format_duration(*plan_.timeout);
    // Where was each rank stuck? Ask before stopping them.
    if (!stacks_.request(StackPurpose::timeout, Clock::now())) begin_teardown(SIGTERM);
  }
  hang_.tick(now);
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
  if (purpose == StackPurpose::hang) hang_.stacks_in();
}

void Supervisor::begin_teardown(int sig) {
  if (teardown_.active()) return;
  exits_.settled();
  // Before the signal: a rank that polls air.should_stop() defers a SIGTERM
  // it cannot tell from a scheduler's, unless its page says it is ours.
  progress_.mark_all_tearing_down();
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

/// Reads the ranks' progress pages: a step or a collective is progress (no hang), and every
/// few seconds the step times say whether a rank is a straggler.
void Supervisor::watch_progress(Clock::time_point now) {
  if (progress_.poll(now)) hang_.clock().progress(now);
  say_lost_progress();
  timeline_.tick(now, progress_, out_);
  if (teardown_.active()) return;
  const ConsoleBatch batch = stragglers_.tick(progress_, now);
  if (!console_.options().quiet) console_.write(batch);
}

/// A rank that broke its own progress page (truncated it, wrote over it)
/// loses its step counts: said once, and the run goes on without them.
void Supervisor::say_lost_progress() {
  for (const auto& [index, why] : progress_.take_lost()) {
    if (console_.options().quiet) continue;
    say("air-run: rank " + std::to_string(ranks_[index].plan->rank) + "'s step counts are lost: " + why +
        "; hang and straggler checks go on without them\n");
  }
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
  say_lost_progress();
  for (auto& r : ranks_)
    if (progress_.reading(r.index).attached) out_.ranks[r.index].steps = progress_.reading(r.index).steps;
  out_.timeline = timeline_.finish(now, progress_, out_);
  settle_preemption(out_);
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
