#include "core/run/supervisor.hpp"

#include "core/base/duration.hpp"
#include "core/base/line_splitter.hpp"
#include "core/base/log_chunker.hpp"
#include "core/base/text.hpp"
#include "core/hw/nvml.hpp"
#include "core/os/containment.hpp"
#include "core/os/file_read.hpp"
#include "core/os/log_sink.hpp"
#include "core/os/oom.hpp"
#include "core/os/process.hpp"
#include "core/os/shared_spawn.hpp"
#include "core/os/signals.hpp"
#include "core/run/console_style.hpp"
#include "core/run/flight_recorder.hpp"
#include "core/run/lost_peer.hpp"
#include "core/run/progress_watch.hpp"
#include "core/run/resume.hpp"
#include "core/run/signal_actions.hpp"
#include "core/run/terminal_line.hpp"
#include "core/run/warm_start.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

/// How long after a rank's exit the end of the run waits for its pipes to
/// close; past that, whatever holds them is a leftover (the sweep ends it).
constexpr auto k_drain_timeout = std::chrono::seconds(2);
/// While tearing down, how often to check that the groups have emptied:
/// descendants are not our children, so no event says when they are gone.
constexpr auto k_group_check_interval = std::chrono::milliseconds(50);
constexpr int k_max_poll_wait_ms = 1000;
/// Before any rank has shown a sign of progress (a step or a line), a hang is
/// diagnosed after at least this long: starting an interpreter and importing
/// torch alone takes seconds to tens of seconds on a loaded machine, and a
/// short --hang-timeout is meant for the training loop, not the start-up.
constexpr auto k_hang_startup_allowance = std::chrono::seconds(60);
/// Across nodes with --on-hang stop: how long a node whose ranks hang waits
/// for node 0's job-wide verdict before it stops on its own (node 0 gathers
/// the places for up to 10 s; an older node 0 never answers).
constexpr auto k_job_hang_verdict_wait = std::chrono::seconds(30);
/// When the first rank to fail reports a lost peer (core/run/lost_peer.hpp), how
/// long to wait for the rank that caused it before the teardown: the cause
/// closes its connections when it starts to exit, and a Python rank with torch
/// loaded takes some hundreds of milliseconds from there to its end.
constexpr auto k_settle_time = std::chrono::seconds(1);
/// How much of a reaped rank's pipes to read before judging how it failed.
constexpr int k_max_drain_reads = 16;
constexpr std::size_t k_read_size = 64 * 1024;
/// At the end, how long the console may take nothing before the rest of
/// air-run's buffered echo is dropped (counted in console_lines_dropped).
constexpr int k_console_stall_ms = 1000;
/// One tail entry keeps at most this much of a line: the tail is for the
/// human summary, and 50 lines of 1 MiB would be 50 MiB.
constexpr std::size_t k_tail_line_max = 4096;
/// How long to wait for the armed Python ranks to write their stacks
/// (core/run/stacks.hpp) before a timeout's teardown goes on without them,
/// and how often to look at the files meanwhile.
constexpr auto k_stack_wait = std::chrono::seconds(2);
/// At most this much of a rank's Flight Recorder dump is read (2000 entries
/// of about 500 bytes each).
constexpr std::size_t k_flight_recorder_max = 4 * 1024 * 1024;
/// For a hang's diagnosis, also the ranks' Flight Recorder dumps: a thread
/// of the rank answers within half a second, then torch serialises the trace.
constexpr auto k_hang_dump_wait = std::chrono::seconds(5);
constexpr auto k_stack_check_interval = std::chrono::milliseconds(50);
/// The width of --timestamps' "12:03:04.567 " before a rank line.
constexpr std::size_t k_clock_stamp_width = 13;
/// At most this much of one rank's stack dump is kept.
constexpr std::size_t k_stack_max = 256 * 1024;

/// The size of `path`, or -1 when it does not exist.
long long file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<long long>(st.st_size);
}

/// The bytes of `path` from `offset` on (at most k_stack_max).
std::string read_from(const std::string& path, long long offset) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd || offset < 0 || ::lseek(fd.get(), offset, SEEK_SET) < 0) return {};
  std::string out;
  char buf[8192];
  while (out.size() < k_stack_max) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double seconds_of(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

/// Sends `sig` to a rank's process group. The group id is the leader's pid;
/// once the leader is reaped and the group has emptied, the kernel may reuse
/// that id, so a late kill could in theory hit an unrelated group. We accept
/// that small window (it needs the pid space to wrap within the teardown)
/// because the alternative, not signalling reaped leaders' groups, would
/// leave their DataLoader workers running. ESRCH (group empty) is expected.
void signal_group(pid_t pgid, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
}

/// Whether `pid`'s /proc/<pid>/stat says it is a live (not zombie) member
/// of process group `pgid`.
bool live_member_of(const char* pid, pid_t pgid) {
  const std::string path = std::string("/proc/") + pid + "/stat";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  char buf[512];
  ssize_t n;
  do {
    n = ::read(fd.get(), buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ppid pgrp ...": comm may contain spaces and ')'.
  const char* close_paren = std::strrchr(buf, ')');
  if (close_paren == nullptr) return false;
  char state = 0;
  long ppid = 0;
  long pgrp = 0;
  if (std::sscanf(close_paren + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) return false;
  return pgrp == pgid && state != 'Z' && state != 'X';
}

/// Whether a live process is left in the group. kill(-pgid, 0) answers
/// "no" cheaply; when it says "yes" the members may all be zombies waiting
/// for their new parent to reap them (a container's PID 1 may never do so),
/// and those are dead for our purpose, so /proc decides.
bool group_alive(pid_t pgid) {
  if (pgid <= 0) return false;
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return false;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return true;
  bool alive = false;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    if (live_member_of(e->d_name, pgid)) {
      alive = true;
      break;
    }
  }
  ::closedir(dir);
  return alive;
}

struct Stream {
  UniqueFd fd;
  LineSplitter splitter;  ///< the console's and the tail's view: lines
  LogChunker log_chunker; ///< the logs' view: the bytes as they came
  bool is_stderr = false;
  bool tty = false; ///< fd is a pseudo-terminal's master (ConsoleOptions::stdout_tty)
};

struct RankState {
  const RankPlan* plan = nullptr;
  std::size_t index = 0;
  pid_t pid = -1;
  bool spawned = false;
  bool reaped = false;
  Stream streams[2];
  Clock::time_point started{};
  Clock::time_point reaped_at{};
  std::string prefix;     ///< "[rank3]: " on stdout
  std::string prefix_err; ///< the same on stderr (coloured or not, per stream)
  std::optional<LineSink> log;
  std::optional<LineSink> stream_logs[2]; ///< torchrun's -r/-t files: stdout.log, stderr.log
  std::string filter_prefix;              ///< "[rankN]: ", before its lines in filtered_*.log
  long long stack_offset = -1;            ///< size of its stack file when the signal went out; -1: not asked
  long long stack_seen = -1;              ///< its size at the previous check
  bool reads_stdin = false;               ///< air-run forwards its stdin to it (ConsoleOptions::stdin_rank)
  int log_open_line = -1;                 ///< the stream whose bytes last left `log` mid-line; -1: none
  /// The first teardown signal air-run sent it while it was running, 0 if
  /// none: its exit status then tells whether that signal ended it.
  int teardown_signal = 0;
  /// Per stream: bytes of the unfinished line already shown (a prompt).
  std::size_t shown_partial[2] = {0, 0};
};

class Supervisor {
public:
  Supervisor(const LaunchPlan& plan, const ConsoleOptions& console, SupervisorHooks* hooks, WarmStart* warm)
      : plan_(plan), console_(console), hooks_(hooks), warm_(warm), stdout_sink_(console.stdout_fd),
        stderr_sink_(console.stderr_fd), read_buf_(k_read_size) {}

  RunOutcome run();

private:
  bool open_logs();
  void spawn_all();
  std::vector<std::pair<RankState*, StartedProcess>>
  start_ranks(std::vector<std::optional<Expected<StartedProcess>>>& warm);
  void spawn_failed(RankState& r, const Error& e);
  std::vector<std::optional<Expected<StartedProcess>>> start_warm_ranks();
  void iterate();
  std::optional<Clock::time_point> next_deadline(Clock::time_point now) const;
  void handle_signals();
  bool held_back(const RankState& r, const Stream& s) const;
  Clock::time_point drain_deadline(const RankState& r) const;
  bool read_stream(RankState& r, Stream& s);
  void drain_ready(RankState& r);
  void close_stream(RankState& r, Stream& s);
  void close_all_streams();
  void deliver(RankState& r, Stream& s, std::string_view data, bool eof);
  void reap();
  void scan_all(std::vector<RankState*>& ended);
  bool reap_one(RankState& r, std::vector<RankState*>& ended);
  void on_rank_ended(RankState& r);
  void check_deadlines();
  void fail(RankState& r, std::string reason, bool lost_peer);
  void stop_for_remote(RemoteFailure failure);
  void tell_hooks();
  /// Sends `event` to the job; what the job decides at once waits in
  /// job_events_ for the next handle_job_events.
  void tell_job(const NodeEvent& event);
  /// Acts on the job's events in order, those that acting on them brings included.
  void handle_job_events();
  void on_job_event(JobEvent event);
  void begin_teardown(int sig);
  void kill_all();
  void announce_teardown(int sig);
  /// Why stacks are being taken: shown on demand (Ctrl-\\), before a
  /// timeout's teardown, or for a hang's diagnosis.
  enum class StackPurpose { show, timeout, hang };
  bool request_stacks(StackPurpose purpose);
  void watch_progress(Clock::time_point now);
  std::function<std::string(std::size_t)> explain_straggler();
  Clock::duration hang_quiet_limit() const;
  void begin_hang_diagnosis();
  void finish_hang_diagnosis();
  void conclude_hang(HangReport report, const std::string& lead);
  void answer_places_asked();
  void finish_job_hang_diagnosis(JobPlaces job);
  bool begin_preemption(int sig, Clock::duration grace, PreemptionReport report = {});
  NodeSteps count_polling_ranks();
  void stop_polling_ranks(int sig, std::uint64_t stop_step, Clock::duration grace, PreemptionReport report);
  bool ask_job_to_preempt(int sig);
  void follow_job_preemption(Clock::time_point now);
  void apply_job_stop(const JobStop& stop);
  void interrupt(int sig);
  bool echo_of_job_preemption();
  bool stacks_ready();
  void collect_stacks();
  bool finished() const;
  void finalize();
  void console_write(LineSink& sink, int fd, std::string_view batch, std::size_t lines);
  void start_live();
  void live_tick();
  void stop_live();
  LiveSnapshot live_snapshot(Clock::time_point now) const;
  SpawnOptions spawn_options(RankState& r) const;
  void show_partial(RankState& r, Stream& s);
  void update_partial(RankState& r, Stream& s);
  void resize_terminals();
  bool stdin_wanted() const;
  void forward_stdin(bool readable, bool writable);
  void stop_stdin();

  const LaunchPlan& plan_;
  ConsoleOptions console_;
  SupervisorHooks* hooks_ = nullptr;
  WarmStart* warm_ = nullptr;
  bool warm_notice_ = false; ///< the warm start's failure has been said
  bool hooks_told_ = false;
  std::deque<JobEvent> job_events_; ///< the job's events not yet acted on
  LineSink stdout_sink_;
  LineSink stderr_sink_;
  std::vector<char> read_buf_;
  std::string console_batch_;
  std::string filtered_batch_;
  std::optional<LineSink>
      filtered_[2]; ///< filtered_stdout.log, filtered_stderr.log (LaunchPlan::filtered_files)

  RunOutcome out_;
  std::vector<RankState> ranks_;
  SignalGuard* signals_ = nullptr;
  std::unique_ptr<Containment> containment_;
  std::optional<std::uint64_t> oom_baseline_;
  Clock::time_point start_{};
  std::optional<Clock::time_point> timeout_deadline_;
  bool tearing_down_ = false;
  /// Set while the provisional root cause is a rank that only reported a lost
  /// peer: the teardown waits until then for the rank that caused it.
  std::optional<Clock::time_point> settle_deadline_;
  std::unordered_map<pid_t, RankState*> by_pid_; ///< live ranks, for reaping by the exited pid
  Clock::time_point grace_deadline_{};
  bool kill_sent_ = false;
  Clock::time_point kill_sent_at_{};
  std::uint64_t end_counter_ = 0;
  /// While the armed ranks write their stacks: when to stop waiting, and
  /// whether a timeout's teardown follows (else they are printed, on demand).
  std::optional<Clock::time_point> stacks_deadline_;
  StackPurpose stacks_purpose_ = StackPurpose::show;
  /// Step counting and the diagnosis of hangs and stragglers
  /// (core/run/progress_watch.hpp); last_progress_ is the last step or line
  /// of any rank, and a hang is diagnosed once per quiet spell.
  ProgressWatch progress_{0};
  Clock::time_point last_progress_{};
  bool progress_seen_ = false; ///< any rank made a step or printed a line
  bool hang_diagnosed_ = false;
  std::optional<Clock::time_point> hang_started_;
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
  Clock::time_point next_straggler_check_{};
  std::vector<int> rank_ids_;    ///< global rank by index, for the diagnosis
  std::optional<LiveView> live_; ///< the live status area, when on
  /// NVML for the readings of a straggler's GPU, opened when one is first named.
  std::unique_ptr<NvmlLibrary> straggler_nvml_;
  bool straggler_nvml_tried_ = false;
  /// Forwarding air-run's stdin to the --stdin rank: the pipe's write end
  /// (nonblocking), what it has not taken yet, and whether stdin has ended.
  UniqueFd rank_stdin_;
  std::string stdin_pending_;
  bool stdin_ended_ = false;
  std::string live_batch_; ///< a console batch wrapped in the area's erase and redraw
};

RunOutcome Supervisor::run() {
  out_.started_at = std::chrono::system_clock::now();
  start_ = Clock::now();
  ranks_.resize(plan_.ranks.size());
  out_.ranks.resize(plan_.ranks.size());
  for (std::size_t i = 0; i < plan_.ranks.size(); ++i) {
    RankState& r = ranks_[i];
    r.plan = &plan_.ranks[i];
    r.index = i;
    r.streams[1].is_stderr = true;
    if (console_.prefix) {
      r.prefix = rank_prefix(r.plan->rank, console_.stdout_color);
      r.prefix_err = rank_prefix(r.plan->rank, console_.stderr_color);
    }
    r.filter_prefix = rank_prefix(r.plan->rank, false); // a file: prefixed even with one rank, never coloured
    out_.ranks[i].rank = r.plan->rank;
    out_.ranks[i].local_rank = r.plan->local_rank;
    rank_ids_.push_back(r.plan->rank);
  }
  progress_ = ProgressWatch(ranks_.size());
  last_progress_ = start_;

  auto guard = SignalGuard::install();
  if (!guard) {
    out_.status = RunOutcome::Status::launch_failed;
    out_.reason = guard.error().message;
    finalize();
    return std::move(out_);
  }
  signals_ = guard->get();
  oom_baseline_ = read_oom_kill_count();

  if (open_logs()) {
    if (plan_.timeout) timeout_deadline_ = start_ + *plan_.timeout;
    raise_open_file_limit();
    Containment::Options containment;
    containment.grace = std::chrono::duration_cast<std::chrono::milliseconds>(plan_.grace_period);
    if (warm_ != nullptr && warm_->pid() > 0) containment.spared.push_back(warm_->pid());
    containment_ = Containment::start(containment);
    spawn_all();
    start_live();
    while (!finished()) iterate();
    // Whatever the ranks left behind (background jobs, daemons that called
    // setsid) ends with the run, as the ranks' own groups did.
    const auto grace = kill_sent_ ? std::chrono::milliseconds(0) : containment.grace;
    out_.leftover_processes = containment_->sweep(grace);
    close_all_streams();
    containment_.reset(); // while SIGPIPE is still ignored: it writes to the watchdog
  }
  stop_live(); // before any report: the terminal is left as it was found
  stop_stdin();
  tell_hooks();
  finalize();
  return std::move(out_);
} // the guard restores the signal mask and SIGPIPE here

bool Supervisor::open_logs() {
  for (auto& r : ranks_) {
    if (r.plan->log_file.empty()) continue;
    auto fd = open_log_file(r.plan->log_file);
    if (!fd) {
      out_.status = RunOutcome::Status::launch_failed;
      out_.reason = fd.error().message;
      return false;
    }
    r.log.emplace(std::move(*fd));
  }
  for (auto& r : ranks_) {
    for (int stream = 0; stream < 2; ++stream) {
      if (r.plan->stream_files[stream].empty()) continue;
      auto fd = open_log_file(r.plan->stream_files[stream]);
      if (!fd) {
        out_.status = RunOutcome::Status::launch_failed;
        out_.reason = fd.error().message;
        return false;
      }
      r.stream_logs[stream].emplace(std::move(*fd));
    }
  }
  for (int stream = 0; stream < 2; ++stream) {
    if (plan_.filtered_files[stream].empty()) continue;
    auto fd = open_log_file(plan_.filtered_files[stream]);
    if (!fd) {
      out_.status = RunOutcome::Status::launch_failed;
      out_.reason = fd.error().message;
      return false;
    }
    filtered_[stream].emplace(std::move(*fd));
  }
  return true;
}

void Supervisor::spawn_all() {
  // Fork every rank first, then confirm their execs: the children exec in
  // parallel instead of one after another (on 32 cores, 64 ranks started
  // about twice as fast). A rank whose exec fails is then found after later
  // ranks were started; the teardown stops them like any running rank.
  // Before the ranks start: a shim maps its page at start-up. Without one
  // (a full disk) the rank runs uncounted, like a non-Python rank.
  for (auto& r : ranks_)
    if (!r.plan->progress_file.empty()) progress_.create(r.index, r.plan->progress_file);
  auto warm = start_warm_ranks();
  for (auto& [r, s] : start_ranks(warm)) {
    auto child = confirm_exec(std::move(s));
    if (!child) {
      if (r->reads_stdin) stop_stdin();
      by_pid_.erase(r->pid); // confirm_exec reaped it
      r->spawned = false;
      r->pid = -1;
      out_.ranks[r->index].pid = -1;
      spawn_failed(*r, child.error());
      continue;
    }
    r->streams[0].fd = std::move(child->stdout_fd);
    r->streams[1].fd = std::move(child->stderr_fd);
    r->streams[0].tty = child->stdout_tty;
    r->streams[1].tty = child->stderr_tty;
    containment_->rank_confirmed(r->pid);
  }
}

/// Starts every rank the warm start did not (`warm`, by rank index), in one
/// SpawnWave: the ranks started, in order, their execs yet to be confirmed.
std::vector<std::pair<RankState*, StartedProcess>>
Supervisor::start_ranks(std::vector<std::optional<Expected<StartedProcess>>>& warm) {
  std::vector<std::pair<RankState*, StartedProcess>> started;
  started.reserve(ranks_.size());
  // One /dev/null for the stdin of every rank of this wave, not an open and
  // a close per rank: each child gets its own copy of the fd (close-on-exec,
  // so only its dup onto fd 0 outlives exec), and ours closes with the wave.
  UniqueFd null_stdin;
  const SpawnWave wave; // every signal blocked once for all the births, not around each
  bool failed = false;
  for (auto& r : ranks_) {
    r.started = Clock::now();
    const bool forked = warm[r.index] && *warm[r.index];
    // After a failure, later ranks are not started (pid stays -1, status
    // not_exited), but those already forked warm are running: kept, so the
    // teardown stops them like any rank.
    if (failed && !forked) continue;
    SpawnOptions options = spawn_options(r);
    if (!forked && !options.stdin_pipe && options.stdin_from < 0) {
      if (!null_stdin) null_stdin.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      options.stdin_from = null_stdin.get(); // -1 if that failed: start_process opens its own
    }
    auto s = forked ? std::move(*warm[r.index])
                    : start_process(r.plan->argv, r.plan->env, containment_->cgroup_target(), options);
    if (!s) {
      spawn_failed(r, s.error());
      failed = true;
      continue;
    }
    r.spawned = true;
    r.reads_stdin = options.stdin_pipe;
    if (r.reads_stdin) rank_stdin_ = std::move(s->child.stdin_fd);
    r.pid = s->child.pid;
    containment_->rank_started(r.pid);
    by_pid_[r.pid] = &r;
    out_.ranks[r.index].pid = r.pid;
    started.emplace_back(&r, std::move(*s));
  }
  return started;
}

/// The ranks the warm interpreter accepts, forked from it in one batch (by
/// rank index; nullopt: start it fresh). A rank it could not fork is started
/// fresh too, and the first such failure (an import error, a refusal, its
/// death) is said: the run goes on, slower.
std::vector<std::optional<Expected<StartedProcess>>> Supervisor::start_warm_ranks() {
  std::vector<std::optional<Expected<StartedProcess>>> out(ranks_.size());
  if (warm_ == nullptr) return out;
  const bool was_ready = warm_->failure().empty();
  std::vector<WarmStart::Rank> batch;
  std::vector<RankState*> whose;
  for (auto& r : ranks_) {
    if (!warm_start_accepts(r.plan->argv, warm_->python())) continue;
    batch.push_back({&r.plan->argv, &r.plan->env, spawn_options(r)});
    whose.push_back(&r);
  }
  if (batch.empty()) return out;
  auto results = warm_->start_ranks(batch, containment_->cgroup_target());
  for (std::size_t i = 0; i < results.size(); ++i) {
    RankState& r = *whose[i];
    if (results[i]) {
      out_.ranks[r.index].warm = true;
      out[r.index] = std::move(results[i]);
      continue;
    }
    if (was_ready && !warm_notice_) {
      warm_notice_ = true;
      const std::string line = "air-run: --preload: rank " + std::to_string(r.plan->rank) +
                               " starts a fresh interpreter: " + results[i].error().message + "\n";
      console_write(stderr_sink_, console_.stderr_fd, line, 1);
    }
  }
  return out;
}

void Supervisor::spawn_failed(RankState& r, const Error& e) {
  RankOutcome& o = out_.ranks[r.index];
  if (e.kind == ErrorKind::not_found || e.kind == ErrorKind::not_executable) {
    // The rank never ran: it is a failed rank with the shell's code.
    r.reaped = true;
    r.reaped_at = Clock::now();
    o.status = ExitStatus::exited_with(e.kind == ErrorKind::not_found ? 127 : 126);
    o.spawn_error = e.message;
    o.end_order = ++end_counter_;
    o.ended_at = r.reaped_at;
    fail(r, "rank " + std::to_string(r.plan->rank) + " could not be started: " + e.message, false);
  } else {
    out_.status = RunOutcome::Status::launch_failed;
    out_.reason = "rank " + std::to_string(r.plan->rank) + ": " + e.message;
    begin_teardown(SIGTERM);
  }
}

bool Supervisor::finished() const {
  if (settle_deadline_) return false; // the teardown has yet to signal the groups
  const auto now = Clock::now();
  for (const auto& r : ranks_) {
    if (r.spawned && !r.reaped) return false;
    // A rank's exit is what counts. Its pipes normally end with it; if they
    // are still open a while later, a background job of its holds them: that
    // job is a leftover like any other (the sweep after the loop ends it,
    // SIGTERM first, and counts it), not a reason to wait.
    if ((r.streams[0].fd || r.streams[1].fd) && (!r.reaped || now < drain_deadline(r))) return false;
  }
  // During teardown, wait for descendants to leave the groups (or for the
  // SIGKILL that ends the grace period), so none outlives air-run.
  if (tearing_down_ && !kill_sent_) {
    for (const auto& r : ranks_)
      if (r.spawned && group_alive(r.pid)) return false;
  }
  return true;
}

std::optional<Clock::time_point> Supervisor::next_deadline(Clock::time_point now) const {
  std::optional<Clock::time_point> next;
  auto consider = [&](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  if (!tearing_down_ && timeout_deadline_) consider(*timeout_deadline_);
  if (!tearing_down_ && plan_.hang_timeout && !hang_diagnosed_) consider(last_progress_ + hang_quiet_limit());
  if (settle_deadline_) consider(*settle_deadline_);
  if (hang_verdict_deadline_) consider(*hang_verdict_deadline_);
  if (preempt_pending_) consider(preempt_pending_->give_up);
  if (stacks_deadline_) consider(std::min(*stacks_deadline_, now + k_stack_check_interval));
  if (tearing_down_ && !kill_sent_) consider(grace_deadline_);
  bool all_quiet = true;
  for (const auto& r : ranks_) {
    const bool open = r.streams[0].fd || r.streams[1].fd;
    if ((r.spawned && !r.reaped) || open) all_quiet = false;
    if (r.reaped && open && (!tearing_down_ || kill_sent_)) consider(drain_deadline(r));
  }
  if (tearing_down_ && !kill_sent_ && all_quiet) consider(now + k_group_check_interval);
  if (hooks_) {
    if (const auto t = hooks_->next_deadline()) consider(*t);
  }
  if (live_) consider(live_->next_deadline());
  return next;
}

void Supervisor::iterate() {
  std::vector<pollfd> fds;
  std::vector<std::pair<RankState*, Stream*>> owners;
  fds.push_back({signals_->fd(), POLLIN, 0});
  owners.emplace_back(nullptr, nullptr);
  for (auto& r : ranks_) {
    for (auto& s : r.streams) {
      if (!s.fd || held_back(r, s)) continue;
      fds.push_back({s.fd.get(), POLLIN, 0});
      owners.emplace_back(&r, &s);
    }
  }
  const std::size_t first_sink_fd = fds.size();
  for (LineSink* sink : {&stdout_sink_, &stderr_sink_}) {
    if (sink->pending()) fds.push_back({sink->poll_fd(), POLLOUT, 0});
  }
  const std::size_t first_hook_fd = fds.size();
  if (hooks_) {
    for (const int fd : hooks_->poll_fds()) fds.push_back({fd, POLLIN, 0});
  }
  // Last: air-run's stdin, or the --stdin rank's pipe while it has input waiting.
  const std::size_t stdin_index = fds.size();
  if (stdin_wanted())
    fds.push_back({STDIN_FILENO, POLLIN, 0});
  else if (rank_stdin_ && !stdin_pending_.empty())
    fds.push_back({rank_stdin_.get(), POLLOUT, 0});
  int timeout_ms = -1;
  const auto now = Clock::now();
  if (const auto deadline = next_deadline(now)) {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count();
    timeout_ms = static_cast<int>(std::clamp<long long>(wait, 0, 24LL * 3600 * 1000));
  }
  // Wake at least once a second even without a deadline: if a thread that a
  // library started (NVML, CUDA) has SIGCHLD unblocked, the kernel may hand
  // the signal to it and the signalfd never hears of an exit. The CLI blocks
  // the signals before any such thread exists; this bounds the damage anyway.
  if (timeout_ms < 0 || timeout_ms > k_max_poll_wait_ms) timeout_ms = k_max_poll_wait_ms;
  const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
  if (ready < 0 && errno != EINTR) {
    // poll only fails like this on EINVAL/ENOMEM; do not spin, give up politely.
    if (!tearing_down_) {
      out_.status = RunOutcome::Status::launch_failed;
      out_.reason = std::string("poll: ") + std::strerror(errno);
      begin_teardown(SIGTERM);
    } else if (!kill_sent_) {
      kill_all();
    }
  }
  // Signals first: an interrupt decides how the exits that follow are read.
  if (ready > 0 && (fds[0].revents & POLLIN)) handle_signals();
  // Then other nodes: a remote failure that caused a local rank's exit (a
  // broken collective) must be judged before that exit is.
  if (hooks_) {
    // In the order the job gives them: its stop step before a failure read
    // in the same pass (node 0's own preemption ends with an abort right
    // behind its stopat).
    for (auto& event : hooks_->check(Clock::now())) job_events_.push_back(std::move(event));
    handle_job_events();
  }
  if (ready > 0 && stdin_index < fds.size() && fds[stdin_index].revents != 0) {
    const bool from_stdin = fds[stdin_index].fd == STDIN_FILENO;
    forward_stdin(from_stdin, !from_stdin);
  }
  if (ready > 0 && first_sink_fd < first_hook_fd) {
    stdout_sink_.flush();
    stderr_sink_.flush();
  }
  if (ready > 0) {
    for (std::size_t i = 1; i < first_sink_fd; ++i) {
      if (fds[i].revents == 0) continue;
      auto [rank, stream] = owners[i];
      if (held_back(*rank, *stream)) continue; // an earlier read in this pass filled the console
      read_stream(*rank, *stream);
    }
  }
  reap(); // cheap, and catches exits whose SIGCHLD merged with another
  watch_progress(Clock::now());
  check_deadlines();
  // Again: a diagnosis that just began or ended here moves the job's on at once.
  if (hooks_) handle_job_events();
  tell_hooks();
  containment_->record_descendants();
  live_tick();
}

void Supervisor::tell_hooks() {
  if (hooks_ == nullptr || hooks_told_ || out_.status == RunOutcome::Status::succeeded ||
      out_.remote_failure || settle_deadline_)
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
  if (out_.status != RunOutcome::Status::succeeded && !settle_deadline_) return;
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
      resize_terminals();
      continue;
    }
    switch (signal_action(sig, plan_.forwarded_signals)) {
    case SignalAction::ignore:
      break;
    case SignalAction::stacks:
      // Ctrl-\ (the ranks are in their own groups, so only air-run gets it):
      // print every armed Python rank's stacks and carry on.
      if (!tearing_down_ && !stacks_deadline_ && !request_stacks(StackPurpose::show)) {
        const std::string line =
            "air-run: no Python rank can show its stack (" + signal_name(sig) + " ignored)\n";
        console_write(stderr_sink_, console_.stderr_fd, line, 1);
      }
      break;
    case SignalAction::forward:
      // Schedulers (Slurm --signal) send these as warnings: ranks that call
      // air.should_stop() are asked to stop at one step (preemption); the
      // others get the signal passed on.
      if ((sig == SIGUSR1 || sig == SIGUSR2) && echo_of_job_preemption()) break;
      if ((sig == SIGUSR1 || sig == SIGUSR2) && !tearing_down_ &&
          out_.status == RunOutcome::Status::succeeded &&
          (preempt_pending_ || ask_job_to_preempt(sig) || begin_preemption(sig, plan_.grace_period)))
        break;
      for (auto& r : ranks_)
        if (r.spawned && !r.reaped) signal_group(r.pid, sig);
      break;
    case SignalAction::teardown:
      if (sig == SIGTERM && echo_of_job_preemption()) {
        // the job stops for it already, at its step
      } else if (tearing_down_) {
        // A second interrupt means "now": skip the rest of the grace period.
        if (!kill_sent_) {
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
      } else if (settle_deadline_) {
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

bool Supervisor::held_back(const RankState& r, const Stream& s) const {
  // The console does not take more now: leave the rank's output in its pipe
  // (a live rank waits, as with any pipe). Not once the run is ending: then
  // the output is taken, and dropped with a count if need be.
  if (!r.plan->console || tearing_down_) return false;
  return (s.is_stderr ? stderr_sink_ : stdout_sink_).full();
}

Clock::time_point Supervisor::drain_deadline(const RankState& r) const {
  auto from = std::max(r.reaped_at, kill_sent_ ? kill_sent_at_ : r.reaped_at);
  // A slow console that still takes output gets it all: count from its last progress.
  for (const auto& s : r.streams) {
    if (s.fd && held_back(r, s))
      from = std::max(from, (s.is_stderr ? stderr_sink_ : stdout_sink_).last_progress());
  }
  return from + k_drain_timeout;
}

bool Supervisor::read_stream(RankState& r, Stream& s) {
  const ssize_t n = ::read(s.fd.get(), read_buf_.data(), read_buf_.size());
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n <= 0) {
    close_stream(r, s); // EOF, or an error that ends the stream all the same
    return false;
  }
  deliver(r, s, std::string_view(read_buf_.data(), static_cast<std::size_t>(n)), false);
  return true;
}

void Supervisor::drain_ready(RankState& r) {
  for (auto& s : r.streams) {
    for (int i = 0; i < k_max_drain_reads && s.fd; ++i) {
      if (!read_stream(r, s)) break;
    }
  }
}

void Supervisor::close_stream(RankState& r, Stream& s) {
  if (!s.fd) return;
  deliver(r, s, {}, true);
  s.fd.reset();
}

void Supervisor::deliver(RankState& r, Stream& s, std::string_view data, bool eof) {
  RankOutcome& o = out_.ranks[r.index];
  const int stream = s.is_stderr ? 1 : 0;
  const bool echo = r.plan->console && r.plan->stream_console[stream];
  const bool log = r.log.has_value() && !r.log->broken();
  std::optional<LineSink>& stream_log = r.stream_logs[stream];
  const bool to_stream_log = stream_log.has_value() && !stream_log->broken();
  const auto tail_max = static_cast<std::size_t>(std::max(plan_.tail_lines, 0));
  if (log || to_stream_log) {
    // The logs get the rank's bytes unchanged; only the console's view
    // splits an over-long line and ends a last line without a newline.
    const auto write_logs = [&](std::string_view bytes, std::size_t newlines) {
      if (log) {
        // One file for both streams: bytes of one that follow a line the
        // other left unfinished (its last line, a piece of an over-long one)
        // start on a line of their own, as they would in separate files.
        if (r.log_open_line >= 0 && r.log_open_line != stream) r.log->write("\n", 1);
        r.log->write(bytes, newlines);
        if (!bytes.empty()) r.log_open_line = bytes.back() == '\n' ? -1 : stream;
        if (r.log->broken()) o.log_error = "write " + r.plan->log_file + ": " + std::strerror(r.log->error());
      }
      if (to_stream_log) {
        stream_log->write(bytes, newlines);
        if (stream_log->broken()) {
          o.log_error = "write " + r.plan->stream_files[stream] + ": " + std::strerror(stream_log->error());
        }
      }
    };
    if (eof)
      s.log_chunker.finish(write_logs);
    else
      s.log_chunker.feed(data, write_logs);
  }
  console_batch_.clear();
  std::size_t lines = 0;
  // One stamp for the lines of one read: they arrived together.
  const std::string stamp = console_.timestamps && echo ? clock_stamp(std::chrono::system_clock::now()) : "";
  const auto& filters = plan_.duplicate_filters[stream];
  std::optional<LineSink>& filtered = filtered_[stream];
  filtered_batch_.clear();
  std::size_t filtered_lines = 0;
  const auto on_line = [&](std::string_view line) {
    ++lines;
    // torchrun's --duplicate-*-filters: the line, prefixed, also in filtered_*.log.
    if (filtered.has_value() && std::any_of(filters.begin(), filters.end(), [&](const std::string& f) {
          return line.find(f) != line.npos;
        })) {
      filtered_batch_ += r.filter_prefix;
      filtered_batch_ += line;
      filtered_batch_ += '\n';
      ++filtered_lines;
    }
    if (echo) {
      std::size_t& shown = r.shown_partial[s.is_stderr ? 1 : 0];
      if (shown == 0) {
        console_batch_ += stamp;
        console_batch_ += s.is_stderr ? r.prefix_err : r.prefix;
      }
      if (s.tty && shown == 0)
        console_batch_ += visible_line(line); // a progress bar's final state, not every '\r' of it
      else
        console_batch_ += line.substr(std::min(shown, line.size())); // a prompt already shown
      console_batch_ += '\n';
      shown = 0;
    }
    if (tail_max > 0) {
      // The tail goes into reports, which hold no escape sequence or NUL byte.
      o.tail.emplace_back(strip_control_characters(std::string_view(line).substr(0, k_tail_line_max)));
      while (o.tail.size() > tail_max) o.tail.pop_front();
    }
  };
  if (eof)
    s.splitter.finish(on_line);
  else
    s.splitter.feed(data, on_line);
  if (filtered_lines > 0 && !filtered->broken()) filtered->write(filtered_batch_, filtered_lines);
  if (echo) update_partial(r, s);
  if (lines == 0) {
    if (echo && r.reads_stdin) show_partial(r, s);
    return;
  }
  o.last_output_at = Clock::now();
  last_progress_ = *o.last_output_at;
  progress_seen_ = true;
  hang_diagnosed_ = false;
  if (echo) {
    if (s.is_stderr)
      console_write(stderr_sink_, console_.stderr_fd, console_batch_, lines);
    else
      console_write(stdout_sink_, console_.stdout_fd, console_batch_, lines);
    if (r.reads_stdin) show_partial(r, s);
  }
}

void Supervisor::reap() {
  // Collect every exit first, then judge them: a rank that ended on its own
  // in the same pass as the root cause must not be marked stopped_by_air_run.
  std::vector<RankState*> ended;
  // Runs every iteration, not only after a SIGCHLD (which can be lost, see
  // k_max_poll_wait_ms). Peek (WNOWAIT) at which child exited and reap exactly
  // that pid, so a wake costs O(exits) system calls rather than one wait4 per
  // live rank; with 1024 ranks the scan made start-up quadratic. Only our own
  // pids are reaped: a child we do not know falls back to the scan.
  for (;;) {
    siginfo_t info{};
    const int rc = ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0 || info.si_pid == 0) break;
    const auto it = by_pid_.find(info.si_pid);
    if (it == by_pid_.end()) {
      if (containment_ && containment_->is_watchdog(info.si_pid)) containment_->watchdog_gone();
      int ignored = 0;
      if (::waitpid(info.si_pid, &ignored, WNOHANG) <= 0) {
        scan_all(ended); // not ours to reap after all; take the ranks' exits
        break;
      }
      continue;
    }
    if (!reap_one(*it->second, ended)) break;
  }
  for (RankState* r : ended) on_rank_ended(*r);
}

void Supervisor::scan_all(std::vector<RankState*>& ended) {
  for (auto& r : ranks_) {
    if (r.spawned && !r.reaped) reap_one(r, ended);
  }
}

bool Supervisor::reap_one(RankState& r, std::vector<RankState*>& ended) {
  int wstatus = 0;
  rusage usage{};
  pid_t got;
  do {
    got = ::wait4(r.pid, &wstatus, WNOHANG, &usage);
  } while (got < 0 && errno == EINTR);
  if (got == 0) return false;
  RankOutcome& o = out_.ranks[r.index];
  r.reaped = true;
  r.reaped_at = Clock::now();
  if (r.reads_stdin) stop_stdin();
  by_pid_.erase(r.pid);
  o.ended_at = r.reaped_at;
  o.end_order = ++end_counter_;
  if (got == r.pid) {
    o.status = ExitStatus::from_wait_status(wstatus);
    o.user_s = seconds_of(usage.ru_utime);
    o.sys_s = seconds_of(usage.ru_stime);
    o.max_rss_kb = usage.ru_maxrss; // kilobytes on Linux
  }
  // else ECHILD: someone else reaped our child; the status stays unknown.
  // Judged by how it ended, not by whether the signal had gone out: a rank
  // may exit with its own code an instant before or after the teardown began.
  // An interruption is the exception: the user's signal, passed on, is what
  // ended every rank still running, whatever it exits with (Python turns
  // SIGINT into KeyboardInterrupt and exits 1; a peer then loses its
  // connection and fails too).
  o.stopped_by_air_run = out_.status == RunOutcome::Status::interrupted
                             ? r.teardown_signal != 0
                             : ended_by_teardown_signal(o.status, r.teardown_signal);
  if (o.killed && !(o.status.kind == ExitStatus::Kind::signaled && o.status.signal == SIGKILL))
    o.killed = false;
  ended.push_back(&r);
  return true;
}

void Supervisor::on_rank_ended(RankState& r) {
  RankOutcome& o = out_.ranks[r.index];
  if (o.status.success() || o.stopped_by_air_run) return;
  if (tearing_down_ || (out_.status != RunOutcome::Status::succeeded && !settle_deadline_)) return;
  // Its last lines may still be in its pipes: they tell a lost peer apart.
  drain_ready(r);
  std::string reason = "rank " + std::to_string(o.rank);
  if (o.status.kind == ExitStatus::Kind::signaled && o.status.signal == SIGKILL && oom_baseline_) {
    const auto now_count = read_oom_kill_count();
    if (now_count && *now_count > *oom_baseline_) o.oom_killed = true;
  }
  if (o.oom_killed)
    reason += " was killed by the OOM killer";
  else if (o.status.kind == ExitStatus::Kind::signaled)
    reason += " was killed by " + o.status.describe();
  else if (o.status.kind == ExitStatus::Kind::exited)
    reason += " exited with " + o.status.describe();
  else
    reason += " ended with an unknown status (reaped elsewhere)";
  fail(r, std::move(reason), reports_lost_peer(o.tail));
}

void Supervisor::fail(RankState& r, std::string reason, bool lost_peer) {
  if (out_.status == RunOutcome::Status::succeeded) {
    out_.status = RunOutcome::Status::failed;
  } else if (!settle_deadline_ || lost_peer) {
    return; // not the first failure, and not the cause the first one was waiting for
  }
  out_.root_cause_rank = r.plan->rank;
  out_.reason = std::move(reason);
  if (lost_peer) {
    // A symptom (its peer went away): the rank that caused it is probably
    // exiting right now. Tear down after it, so that it is found as the cause
    // and not stopped by our SIGTERM first.
    settle_deadline_ = Clock::now() + k_settle_time;
    return;
  }
  begin_teardown(SIGTERM);
}

void Supervisor::check_deadlines() {
  const auto now = Clock::now();
  if (settle_deadline_) {
    const bool all_ended =
        std::all_of(ranks_.begin(), ranks_.end(), [](const RankState& r) { return !r.spawned || r.reaped; });
    if (now >= *settle_deadline_ || all_ended) begin_teardown(SIGTERM);
  }
  if (!tearing_down_ && out_.status == RunOutcome::Status::succeeded && timeout_deadline_ &&
      now >= *timeout_deadline_) {
    out_.status = RunOutcome::Status::timed_out;
    out_.reason = "timed out after " + format_duration(*plan_.timeout);
    // Where was each rank stuck? Ask before stopping them.
    if (!request_stacks(StackPurpose::timeout)) begin_teardown(SIGTERM);
  }
  if (!tearing_down_ && out_.status == RunOutcome::Status::succeeded && plan_.hang_timeout &&
      !hang_diagnosed_ && !stacks_deadline_ && now - last_progress_ >= hang_quiet_limit()) {
    begin_hang_diagnosis();
    tell_job(NodeEvent::quiet_ranks());
  }
  if (hang_verdict_deadline_ && now >= *hang_verdict_deadline_) {
    hang_verdict_deadline_.reset();
    // Node 0 never decided (an older agent, or no --hang-timeout there): stop as one node would.
    if (hang_diagnosed_ && out_.hang && !tearing_down_ && out_.status == RunOutcome::Status::succeeded)
      conclude_hang(std::move(*out_.hang), {});
  }
  if (stacks_deadline_ && (now >= *stacks_deadline_ || stacks_ready())) {
    stacks_deadline_.reset();
    const StackPurpose purpose = stacks_purpose_;
    collect_stacks();
    if (purpose == StackPurpose::timeout) begin_teardown(SIGTERM);
    if (purpose == StackPurpose::hang) finish_hang_diagnosis();
  }
  if (tearing_down_ && !kill_sent_ && now >= grace_deadline_) kill_all();
}

/// The end of the run, once the leftovers are gone: takes what is still in
/// the pipes and closes them. Their writers have ended, so a read finds the
/// end at once; one that still does not (a writer beyond air-run's reach)
/// is left after what it wrote so far.
void Supervisor::close_all_streams() {
  for (auto& r : ranks_) {
    for (auto& s : r.streams) {
      while (s.fd) {
        const ssize_t n = ::read(s.fd.get(), read_buf_.data(), read_buf_.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        deliver(r, s, std::string_view(read_buf_.data(), static_cast<std::size_t>(n)), false);
      }
      close_stream(r, s);
    }
  }
}

void Supervisor::begin_teardown(int sig) {
  if (tearing_down_) return;
  tearing_down_ = true;
  settle_deadline_.reset();
  grace_deadline_ = Clock::now() + plan_.grace_period;
  for (auto& r : ranks_) {
    if (!r.spawned) continue;
    if (!r.reaped && r.teardown_signal == 0) r.teardown_signal = sig;
    // Reaped leaders' groups too: their descendants must not linger.
    signal_group(r.pid, sig);
  }
  // And what left the groups (setsid, setpgid) or lost its rank parent.
  if (containment_) containment_->signal_all(sig);
}

void Supervisor::kill_all() {
  kill_sent_ = true;
  kill_sent_at_ = Clock::now();
  for (auto& r : ranks_) {
    if (!r.spawned) continue;
    if (!r.reaped) {
      if (r.teardown_signal == 0) r.teardown_signal = SIGKILL;
      if (tearing_down_) out_.ranks[r.index].killed = true; // it outlived SIGTERM
    }
    signal_group(r.pid, SIGKILL);
  }
  if (containment_) containment_->signal_all(SIGKILL);
}

/// Says at once what the teardown will do and how to cut it short: after
/// Ctrl-C, a silent grace period of up to 30 s looks like a hang.
void Supervisor::announce_teardown(int sig) {
  if (console_.quiet) return;
  std::size_t running = 0;
  for (const auto& r : ranks_)
    if (r.spawned && !r.reaped) ++running;
  if (running == 0) return;
  const std::string line = "air-run: stopping " + std::to_string(running) +
                           (running == 1 ? " rank (" : " ranks (") + signal_name(sig) + "), up to " +
                           format_duration(plan_.grace_period) + "; Ctrl-C again to kill now\n";
  console_write(stderr_sink_, console_.stderr_fd, line, 1);
}

/// Sends the stack signal to every running rank that armed it. Returns
/// whether any was asked; the loop then waits (stacks_deadline_) for the dumps.
bool Supervisor::request_stacks(StackPurpose purpose) {
  if (plan_.stack_signal <= 0) return false;
  bool asked = false;
  for (auto& r : ranks_) {
    r.stack_offset = -1;
    if (!r.spawned || r.reaped || r.plan->stack_file.empty()) continue;
    const long long size = file_size(r.plan->stack_file);
    if (size < 0) continue; // not armed (yet): the signal would kill it
    if (::kill(r.pid, plan_.stack_signal) != 0) continue;
    r.stack_offset = size;
    r.stack_seen = size;
    asked = true;
  }
  if (!asked) return false;
  stacks_purpose_ = purpose;
  stacks_deadline_ = Clock::now() + (purpose == StackPurpose::hang ? k_hang_dump_wait : k_stack_wait);
  return true;
}

/// Whether every asked rank's dump has arrived: its file grew, and did not
/// grow since the previous check (faulthandler writes a dump in many writes).
bool Supervisor::stacks_ready() {
  bool ready = true;
  for (auto& r : ranks_) {
    if (r.stack_offset < 0 || r.reaped) continue;
    const long long size = file_size(r.plan->stack_file);
    if (size <= r.stack_offset || size != r.stack_seen) ready = false;
    r.stack_seen = size;
  }
  if (stacks_purpose_ == StackPurpose::hang && !progress_.flight_recorder_answered()) ready = false;
  return ready;
}

/// Reads the dumps: into the outcome for a timeout, onto the console on demand.
void Supervisor::collect_stacks() {
  const auto now = Clock::now();
  std::string batch;
  std::size_t lines = 0;
  for (auto& r : ranks_) {
    if (r.stack_offset < 0) continue;
    // A stack names the rank's files and functions; shown by air-run, it holds no escape sequence.
    std::string stack =
        strip_control_characters(read_from(r.plan->stack_file, r.stack_offset), LineBreaks::keep);
    r.stack_offset = -1;
    RankOutcome& o = out_.ranks[r.index];
    if (stacks_purpose_ != StackPurpose::show) {
      o.stack = std::move(stack);
      if (stacks_purpose_ == StackPurpose::timeout && o.last_output_at)
        o.last_output_age_s = seconds_between(*o.last_output_at, now);
      continue;
    }
    if (stack.empty()) stack = "(no stack written)\n";
    if (stack.back() != '\n') stack += '\n';
    std::size_t begin = 0;
    while (begin < stack.size()) {
      const std::size_t end = stack.find('\n', begin);
      batch += "[rank" + std::to_string(r.plan->rank) + " stack]: ";
      batch.append(stack, begin, end - begin + 1);
      ++lines;
      begin = end + 1;
    }
  }
  if (lines > 0) console_write(stderr_sink_, console_.stderr_fd, batch, lines);
}

/// Reads the ranks' progress pages: a step is progress (no hang), and every
/// few seconds the step times say whether a rank is a straggler.
void Supervisor::watch_progress(Clock::time_point now) {
  if (progress_.poll(now)) {
    last_progress_ = now;
    progress_seen_ = true;
    hang_diagnosed_ = false;
  }
  if (now < next_straggler_check_ || tearing_down_) return;
  next_straggler_check_ = now + std::chrono::seconds(2);
  std::string batch;
  std::size_t lines = 0;
  for (const std::string& line : progress_.name_new_stragglers(rank_ids_, explain_straggler())) {
    batch += "air-run: " + line + "\n";
    ++lines;
  }
  if (lines > 0 && !console_.quiet) console_write(stderr_sink_, console_.stderr_fd, batch, lines);
}

/// What may explain a straggler on a GPU: that GPU's clocks, the reasons the
/// driver holds them down, temperature and power, read when the rank is
/// first named (NVML opened then, once). "" for a CPU rank or without NVML.
std::function<std::string(std::size_t)> Supervisor::explain_straggler() {
  return [this](std::size_t index) -> std::string {
    const std::string& uuid = ranks_[index].plan->gpu_uuid;
    if (uuid.empty()) return {};
    if (!straggler_nvml_tried_) {
      straggler_nvml_tried_ = true;
      if (auto lib = NvmlLibrary::open()) straggler_nvml_ = std::make_unique<NvmlLibrary>(std::move(*lib));
    }
    if (!straggler_nvml_) return {};
    auto reading = straggler_nvml_->read_clock_reading(uuid);
    return reading ? describe_gpu_clocks(uuid, *reading) : std::string();
  };
}

/// How long the ranks may be quiet before a hang is diagnosed: --hang-timeout,
/// with the start-up allowance until the first sign of progress.
Clock::duration Supervisor::hang_quiet_limit() const {
  const Clock::duration limit = *plan_.hang_timeout;
  return progress_seen_ ? limit : std::max<Clock::duration>(limit, k_hang_startup_allowance);
}

/// No rank made progress for --hang-timeout: ask the ranks for their stacks
/// and Flight Recorder traces; finish_hang_diagnosis reads them.
void Supervisor::begin_hang_diagnosis() {
  hang_diagnosed_ = true;
  hang_started_ = last_progress_;
  progress_.request_flight_recorder();
  // Stacks already asked for (Ctrl-\\, a timeout) keep their purpose: go on without.
  if (stacks_deadline_ || !request_stacks(StackPurpose::hang)) finish_hang_diagnosis();
}

/// Across nodes: answers node 0's question for this node's places, from the
/// diagnosis of this quiet spell, or a new one.
void Supervisor::answer_places_asked() {
  if (stacks_deadline_ && stacks_purpose_ == StackPurpose::hang) {
    // finish_hang_diagnosis answers
  } else if (hang_diagnosed_ && !local_places_.empty()) {
    tell_job(NodeEvent::placed_ranks(local_places_));
  } else {
    hang_asked_ = true;
    begin_hang_diagnosis();
  }
}

namespace {

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

/// Names the laggards from each rank's place in its collectives and its
/// stack, prints the diagnosis and records it; with --on-hang stop, ends the run.
void Supervisor::finish_hang_diagnosis() {
  const auto now = Clock::now();
  const auto wall_now = std::chrono::system_clock::now();
  const std::int64_t mono_now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  HangReport report;
  report.quiet_s = seconds_between(hang_started_.value_or(last_progress_), now);
  report.at = wall_now;
  for (auto& r : ranks_) {
    const ProgressReading& p = progress_.reading(r.index);
    RankOutcome& o = out_.ranks[r.index];
    HangRank h;
    h.rank = r.plan->rank;
    h.running = r.spawned && !r.reaped;
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
    console_write(stderr_sink_, console_.stderr_fd, batch, asked ? 1 : 2);
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
                            hang_diagnosed_ ? seconds_between(hang_started_.value_or(now), now) : 0.0);
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
  console_write(stderr_sink_, console_.stderr_fd, batch, lines);
  out_.hang = std::move(report);
  if (stop && !tearing_down_ && out_.status == RunOutcome::Status::succeeded) {
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
    if (!r.spawned || r.reaped || !progress_.reading(r.index).polls_stop) continue;
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
  tearing_down_ = true;
  settle_deadline_.reset();
  preempt_pending_.reset();
  grace_deadline_ = Clock::now() + grace;
  std::vector<std::string> passed; // ranks already past a step the job chose elsewhere
  for (auto& r : ranks_) {
    if (!r.spawned || r.reaped || !progress_.reading(r.index).polls_stop) continue;
    progress_.request_stop(r.index, stop_step, deadline_ns);
    r.teardown_signal = sig;
    report.polling_ranks.push_back(r.plan->rank);
    const std::uint64_t steps = progress_.reading(r.index).steps;
    if (stop_step > 0 && steps >= stop_step)
      passed.push_back("rank " + std::to_string(r.plan->rank) + " is at step " + std::to_string(steps));
  }
  for (auto& r : ranks_) {
    if (!r.spawned || r.reaped || r.teardown_signal != 0) continue;
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
  if (!console_.quiet) {
    std::string lines;
    if (!report.polling_ranks.empty())
      lines += "air-run: " + signal_name(sig) + where + ": asking rank" +
               (report.polling_ranks.size() > 1 ? "s " : " ") + rank_words(report.polling_ranks) +
               " to stop" + (stop_step > 0 ? " at step " + std::to_string(stop_step) : std::string()) +
               (report.job_wide ? " (the job's, from node 0)" : "") + ", up to " +
               format_duration(std::chrono::duration_cast<Millis>(grace)) + "; Ctrl-C again to kill now\n";
    for (const auto& p : passed)
      lines += "air-run: " + p + ", past the job's stop step: it stops at its next should_stop()\n";
    if (!lines.empty()) console_write(stderr_sink_, console_.stderr_fd, lines, 1 + passed.size());
  }
  out_.preemption = std::move(report);
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
  if (!console_.quiet) {
    const std::string line = "air-run: " + signal_name(sig) +
                             ": agreeing on one stop step with the other nodes (node 0 picks it)\n";
    console_write(stderr_sink_, console_.stderr_fd, line, 1);
  }
  return true;
}

/// Every pass, across nodes, once the job's events are acted on (its stop
/// step among them): falls back to this node's own step when node 0 stays
/// silent past k_preempt_decision_wait.
void Supervisor::follow_job_preemption(Clock::time_point now) {
  if (!preempt_pending_) return;
  if (tearing_down_ || out_.status != RunOutcome::Status::succeeded) {
    preempt_pending_.reset(); // the run ends otherwise (a failure here or elsewhere)
    return;
  }
  if (now < preempt_pending_->give_up) return;
  const PendingPreemption pending = *preempt_pending_;
  preempt_pending_.reset();
  if (!console_.quiet) {
    const std::string line =
        "air-run: node 0 did not pick a stop step within " + format_duration(k_preempt_decision_wait) +
        ": this node's ranks stop at a step of its own, which other nodes may not share\n";
    console_write(stderr_sink_, console_.stderr_fd, line, 1);
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
  if (tearing_down_ || out_.status != RunOutcome::Status::succeeded) return; // ending otherwise already
  Clock::duration grace = stop.grace;
  if (pending) grace = std::min(grace, pending->at + plan_.grace_period - now);
  if (!stop.missing_nodes.empty() && !console_.quiet) {
    const std::string line = std::string("air-run: ") +
                             (stop.missing_nodes.size() == 1 ? "node " : "nodes ") +
                             rank_words(stop.missing_nodes) + " sent no step count within " +
                             format_duration(k_preempt_counts_wait) + ": the stop step was picked without " +
                             (stop.missing_nodes.size() == 1 ? "it" : "them") + "\n";
    console_write(stderr_sink_, console_.stderr_fd, line, 1);
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
  // Every rank has stopped: what they saved is what a new launch resumes from.
  if (out_.preemption && !plan_.checkpoint_dir.empty())
    out_.preemption->checkpoint = latest_checkpoint(plan_.checkpoint_dir).value_or("");
  progress_.name_new_stragglers(rank_ids_, explain_straggler());
  out_.stragglers = progress_.stragglers();
  // Bounded: a console nobody reads must not keep air-run from reporting.
  stdout_sink_.finish(k_console_stall_ms);
  stderr_sink_.finish(k_console_stall_ms);
  out_.console_lines_dropped = stdout_sink_.lines_dropped() + stderr_sink_.lines_dropped();
}

/// Which rank gets the terminal as its stdin (ConsoleOptions::stdin_rank).
SpawnOptions Supervisor::spawn_options(RankState& r) const {
  SpawnOptions options;
  options.stdin_pipe = r.plan->rank == console_.stdin_rank;
  if (!r.plan->cpu_affinity.empty()) bind_to(options, r.plan->cpu_affinity, r.plan->numa_node);
  // A terminal only where the rank's stream reaches air-run's terminal: a
  // stream that goes to files only (-r) or a rank off the console (--ranks)
  // keeps its pipe, as its output is no terminal's either.
  options.stdout_tty = console_.stdout_tty && r.plan->console && r.plan->stream_console[0];
  options.stderr_tty = console_.stderr_tty && r.plan->console && r.plan->stream_console[1];
  if (options.stdout_tty || options.stderr_tty) {
    // As wide as what is left of the line after the prefix (and time stamp),
    // so a progress bar sized to the terminal fits on one line.
    winsize size{};
    const int fd = console_.stdout_tty ? console_.stdout_fd : console_.stderr_fd;
    if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 && size.ws_row > 0) {
      const std::size_t taken = visible_width(r.prefix) + (console_.timestamps ? k_clock_stamp_width : 0);
      options.tty_columns = static_cast<unsigned short>(
          std::max<std::size_t>(20, size.ws_col > taken ? size.ws_col - taken : 0));
      options.tty_rows = size.ws_row;
    }
  }
  return options;
}

/// Gives the ranks' terminals air-run's new size (less the prefix), so a
/// library that asks again draws to the new width.
void Supervisor::resize_terminals() {
  for (auto& r : ranks_) {
    if (!r.spawned || r.reaped) continue;
    const SpawnOptions options = spawn_options(r);
    if (options.tty_columns == 0) continue;
    winsize size{};
    size.ws_col = options.tty_columns;
    size.ws_row = options.tty_rows;
    for (auto& s : r.streams)
      if (s.tty && s.fd) ::ioctl(s.fd.get(), TIOCSWINSZ, &size);
  }
}

/// Shows a rank's unfinished line under the output (or takes it away), on a
/// pseudo-terminal stream that reaches the live area's terminal.
void Supervisor::update_partial(RankState& r, Stream& s) {
  if (!live_ || !s.tty || r.reads_stdin) return;
  const int stream = s.is_stderr ? 1 : 0;
  if (!live_->wraps(stream == 1 ? console_.stderr_fd : console_.stdout_fd)) return;
  const std::size_t key = r.index * 2 + static_cast<std::size_t>(stream);
  const std::string shown = s.splitter.has_partial() ? visible_line(s.splitter.partial()) : std::string();
  live_->set_partial(key, shown.empty() ? shown : (stream == 1 ? r.prefix_err : r.prefix) + shown);
}

/// Shows the unfinished line of the rank that reads the terminal as it
/// comes: an input() or pdb prompt ends without a newline and would
/// otherwise stay hidden while the rank waits for an answer.
void Supervisor::show_partial(RankState& r, Stream& s) {
  const std::string_view partial = s.splitter.partial();
  std::size_t& shown = r.shown_partial[s.is_stderr ? 1 : 0];
  if (partial.size() <= shown) return;
  std::string text = shown == 0 ? (s.is_stderr ? r.prefix_err : r.prefix) : std::string();
  text += partial.substr(shown);
  shown = partial.size();
  (s.is_stderr ? stderr_sink_ : stdout_sink_).write(text, 0);
}

/// Whether to read air-run's stdin now: a rank takes it, nothing is waiting
/// to go into its pipe, and (on a terminal) air-run is in the foreground; a
/// background read of the terminal would stop air-run (SIGTTIN).
bool Supervisor::stdin_wanted() const {
  if (!rank_stdin_ || stdin_ended_ || !stdin_pending_.empty()) return false;
  return ::isatty(STDIN_FILENO) != 1 || ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
}

/// Moves air-run's stdin into the --stdin rank's pipe. The rank's stdin is a
/// pipe, not the terminal: air-run stays the terminal's foreground group, so
/// Ctrl-C still stops the run the usual way, while the terminal (in its usual
/// line mode) echoes what is typed and hands it over a line at a time.
void Supervisor::forward_stdin(bool readable, bool writable) {
  if (readable) {
    char buf[4096];
    const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n > 0) {
      stdin_pending_.append(buf, static_cast<std::size_t>(n));
      writable = true;
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      stdin_ended_ = true; // EOF (Ctrl-D) reaches the rank once it took the rest
    }
  }
  if (writable && rank_stdin_ && !stdin_pending_.empty()) {
    const ssize_t n = ::write(rank_stdin_.get(), stdin_pending_.data(), stdin_pending_.size());
    if (n > 0)
      stdin_pending_.erase(0, static_cast<std::size_t>(n));
    else if (n < 0 && errno != EAGAIN && errno != EINTR)
      stop_stdin(); // EPIPE: the rank closed its stdin
  }
  if (stdin_ended_ && stdin_pending_.empty()) rank_stdin_.reset();
}

/// Stops forwarding: the rank ended or closed its stdin.
void Supervisor::stop_stdin() {
  rank_stdin_.reset();
  stdin_pending_.clear();
}

/// Writes whole lines to the console. On the live area's terminal they go out
/// in one write between the area's erase and its redraw, so the area never
/// splits a line and always ends up under the newest one.
void Supervisor::console_write(LineSink& sink, int fd, std::string_view batch, std::size_t lines) {
  if (!live_ || !live_->wraps(fd)) {
    sink.write(batch, lines);
    return;
  }
  live_batch_ = live_->erase();
  live_batch_ += batch;
  live_batch_ += live_->redraw();
  sink.write(live_batch_, lines);
}

/// Turns the live area on (when the caller asked for it), once the ranks run.
void Supervisor::start_live() {
  // Without the status (--no-live, -q) the area still carries the ranks'
  // unfinished lines when they have terminals; not beside a rank's prompt
  // (--stdin), which owns the last line.
  const bool prompt =
      std::any_of(ranks_.begin(), ranks_.end(), [](const RankState& r) { return r.reads_stdin; });
  const bool partials =
      (console_.stdout_tty || console_.stderr_tty) && ::isatty(console_.stderr_fd) == 1 && !prompt;
  if (!console_.live && !partials) return;
  live_.emplace(console_.stderr_fd, console_.stdout_fd, console_.live_gpus, console_.live_nvml,
                console_.stderr_color, console_.live);
  live_tick();
}

/// Redraws the area when its deadline has come (core/run/live_view.hpp).
void Supervisor::live_tick() {
  if (!live_) return;
  const auto now = Clock::now();
  if (now < live_->next_deadline()) return;
  // A console that is behind gets no redraw now: the next batch of lines
  // brings the area along anyway.
  if (stdout_sink_.pending() || stderr_sink_.pending()) return;
  const std::string text = live_->tick(now, live_snapshot(now));
  if (!text.empty()) stderr_sink_.write(text, 0);
}

/// Erases the area for good: the run is over, the report follows.
void Supervisor::stop_live() {
  if (!live_) return;
  const std::string text = live_->close();
  if (!text.empty()) stderr_sink_.write(text, 0);
  live_.reset();
}

LiveSnapshot Supervisor::live_snapshot(Clock::time_point now) const {
  LiveSnapshot s;
  for (const auto& r : ranks_) {
    if (r.spawned && !r.reaped) {
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
  if (tearing_down_ && !kill_sent_)
    s.stopping_s = std::max(0.0, seconds_between(now, grace_deadline_));
  else if (timeout_deadline_ && !tearing_down_)
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
