// The spawn wave: every rank started, cold or warm.
#include "core/run/rank_spawn.hpp"

#include "core/os/containment.hpp"
#include "core/os/pipe_capacity.hpp"
#include "core/os/shared_spawn.hpp"
#include "core/run/terminal_line.hpp"
#include "core/warm/warm_start.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

namespace air {

namespace {

/// The width of --timestamps' "12:03:04.567 " before a rank line.
constexpr std::size_t k_clock_stamp_width = 13;

} // namespace

void RankSpawn::spawn_all(ProgressWatch& progress, Containment& containment, StdinRelay& stdin,
                          const Failed& failed) {
  // Before the ranks start: a shim maps its page at start-up. Without one
  // (a full disk) the rank runs uncounted, like a non-Python rank.
  for (auto& r : ranks_)
    if (!r.plan->progress_file.empty()) progress.create(r.index, r.plan->progress_file);
  auto warm = start_warm_ranks(containment);
  for (auto& [r, s] : start_ranks(warm, containment, stdin, failed)) {
    auto child = confirm_exec(std::move(s));
    if (!child) {
      if (r->reads_stdin) stdin.stop();
      ranks_.forget(*r); // confirm_exec reaped it
      r->spawned = false;
      r->pid = -1;
      out_.ranks[r->index].pid = -1;
      failed(*r, child.error());
      continue;
    }
    r->streams[0].fd = std::move(child->stdout_fd);
    r->streams[1].fd = std::move(child->stderr_fd);
    r->streams[0].tty = child->stdout_tty;
    r->streams[1].tty = child->stderr_tty;
    containment.rank_confirmed(r->pid);
  }
}

/// Starts every rank the warm start did not (`warm`, by rank index), in one
/// SpawnWave: the ranks started, in order, their execs yet to be confirmed.
/// The ranks forked warm are recorded first, then the fresh ones are born
/// in rank order; a failure is said once every started rank is recorded.
RankSpawn::Started RankSpawn::start_ranks(WarmResults& warm, Containment& containment, StdinRelay& stdin,
                                          const Failed& failed) {
  // One /dev/null for the stdin of every rank of this wave, not an open and
  // a close per rank: each child gets its own copy of the fd (close-on-exec,
  // so only its dup onto fd 0 outlives exec), and ours closes with the wave.
  UniqueFd null_stdin;
  const SpawnWave wave; // every signal blocked once for all the births, not around each
  struct Birth {
    RankState* rank;
    SpawnOptions options;
  };
  std::vector<Birth> births;
  births.reserve(ranks_.size());
  Started started;
  started.reserve(ranks_.size());
  // The first failure, said after every started rank is recorded: it may
  // begin the teardown, which signals the ranks recorded by then and no later one.
  std::optional<std::pair<RankState*, Error>> failure;
  const auto record = [&](RankState& r, StartedProcess s, bool reads_stdin) {
    r.reads_stdin = reads_stdin;
    if (r.reads_stdin) stdin.attach(std::move(s.child.stdin_fd));
    ranks_.started(r, s.child.pid);
    containment.rank_started(r.pid);
    out_.ranks[r.index].pid = r.pid;
    started.emplace_back(&r, std::move(s));
  };
  for (auto& r : ranks_) {
    r.started = std::chrono::steady_clock::now();
    const bool forked = warm[r.index] && *warm[r.index];
    if (forked) {
      record(r, std::move(*warm[r.index]).value(), spawn_options(r).stdin_pipe);
      continue;
    }
    // After a failure, later ranks are not started (pid stays -1, status
    // not_exited), but those already forked warm are running: kept, so the
    // teardown stops them like any rank.
    if (warm[r.index]) {
      // Its fork request went out unanswered: a copy may run. One rank is one
      // process: it fails, and a restart, if any, starts it fresh.
      failure.emplace(&r, warm[r.index]->error());
      for (auto& later : ranks_)
        if (later.index > r.index && warm[later.index] && *warm[later.index])
          record(later, std::move(*warm[later.index]).value(), spawn_options(later).stdin_pipe);
      break;
    }
    SpawnOptions options = spawn_options(r);
    if (!options.stdin_pipe && options.stdin_from < 0) {
      if (!null_stdin) null_stdin.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      options.stdin_from = null_stdin.get(); // -1 if that failed: start_process opens its own
    }
    births.push_back({&r, options});
  }
  const CgroupTarget cgroup = containment.cgroup_target();
  const std::uint64_t handlers = handled_signals(); // once, not once a rank
  for (Birth& b : births) {
    b.options.handled_signals = handlers;
    b.rank->started = std::chrono::steady_clock::now();
    auto s = start_rank_process(b.rank->plan->argv, b.rank->plan->env, cgroup, b.options);
    if (!s) {
      failure.emplace(b.rank, s.error()); // the births all come before a warm one in doubt
      break;                              // the ranks after it are not started
    }
    record(*b.rank, std::move(*s), b.options.stdin_pipe);
  }
  if (failure) failed(*failure->first, failure->second);
  return started;
}

/// The ranks the warm interpreter accepts, forked from it in one batch (by
/// rank index; nullopt: start it fresh; an error: fail it). A rank it could
/// not fork is started fresh too (unless it may have been forked), and the
/// first such failure (an import error, a refusal, its death) is said: the
/// run goes on, slower.
RankSpawn::WarmResults RankSpawn::start_warm_ranks(Containment& containment) {
  WarmResults out(ranks_.size());
  if (warm_ == nullptr) return out;
  const bool was_ready = warm_->failure().empty();
  // Bounded by the run's --timeout and its stop signals: past either, the
  // ranks start fresh and the supervisor's first pass ends the run (124,
  // 128+N) before they get far.
  warm_->ready(deadline_, meanwhile_);
  std::vector<WarmStart::Rank> batch;
  std::vector<RankState*> whose;
  for (auto& r : ranks_) {
    if (!warm_start_accepts(r.plan->argv, warm_->python())) continue;
    batch.push_back({&r.plan->argv, &r.plan->env, spawn_options(r)});
    whose.push_back(&r);
  }
  if (batch.empty()) return out;
  auto results = warm_->start_ranks(batch, containment.cgroup_target());
  for (std::size_t i = 0; i < results.size(); ++i) {
    RankState& r = *whose[i];
    if (results[i].process) {
      out_.ranks[r.index].warm = true;
      out[r.index] = std::move(results[i].process);
      continue;
    }
    if (results[i].in_doubt) {
      out[r.index] = std::move(results[i].process); // an error: start_ranks fails the rank
      continue;
    }
    if (was_ready && !warm_notice_) {
      warm_notice_ = true;
      const std::string line = "air-run: --preload: rank " + std::to_string(r.plan->rank) +
                               " starts a fresh interpreter: " + results[i].process.error().message + "\n";
      console_.say(line);
    }
  }
  return out;
}

/// How rank `r` starts: which rank gets the terminal as its stdin
/// (ConsoleOptions::stdin_rank), its CPUs, and its terminals.
SpawnOptions RankSpawn::spawn_options(const RankState& r) const {
  const ConsoleOptions& console = console_.options();
  SpawnOptions options;
  options.stdin_pipe = r.plan->rank == console.stdin_rank;
  if (!r.plan->cpu_affinity.empty()) bind_to(options, r.plan->cpu_affinity, r.plan->numa_node);
  // Room for a rank that prints in bulk, shared out among the node's pipes.
  options.output_pipe_size = output_pipe_size(2 * ranks_.size(), pipe_limits());
  // A terminal only where the rank's stream reaches air-run's terminal: a
  // stream that goes to files only (-r) or a rank off the console (--ranks)
  // keeps its pipe, as its output is no terminal's either.
  options.stdout_tty = console.stdout_tty && r.plan->console && r.plan->stream_console[0];
  options.stderr_tty = console.stderr_tty && r.plan->console && r.plan->stream_console[1];
  if (options.stdout_tty || options.stderr_tty) {
    // As wide as what is left of the line after the prefix (and time stamp),
    // so a progress bar sized to the terminal fits on one line.
    winsize size{};
    const int fd = console.stdout_tty ? console.stdout_fd : console.stderr_fd;
    if (::ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 && size.ws_row > 0) {
      const std::size_t taken = visible_width(r.prefix) + (console.timestamps ? k_clock_stamp_width : 0);
      options.tty_columns = static_cast<unsigned short>(
          std::max<std::size_t>(20, size.ws_col > taken ? size.ws_col - taken : 0));
      options.tty_rows = size.ws_row;
    }
  }
  return options;
}

void RankSpawn::resize_terminals() {
  for (auto& r : ranks_) {
    if (!r.running()) continue;
    const SpawnOptions options = spawn_options(r);
    if (options.tty_columns == 0) continue;
    winsize size{};
    size.ws_col = options.tty_columns;
    size.ws_row = options.tty_rows;
    for (auto& s : r.streams)
      if (s.tty && s.fd) ::ioctl(s.fd.get(), TIOCSWINSZ, &size);
  }
}

} // namespace air
