// The supervisor's hooks for events from other nodes, driven with real
// fixture processes and a pipe standing in for the control connection.
#include "core/run/supervisor.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/temp_dir.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using air::test::fixture;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

air::LaunchPlan plan_of(const std::vector<std::vector<std::string>>& argvs) {
  air::LaunchPlan plan;
  plan.world_size = static_cast<int>(argvs.size());
  plan.ranks_per_node = plan.world_size;
  plan.grace_period = air::Millis(5'000);
  plan.tail_lines = 0;
  const air::Environment env = air::current_environment();
  for (std::size_t i = 0; i < argvs.size(); ++i) {
    air::RankPlan r;
    r.rank = static_cast<int>(i);
    r.local_rank = static_cast<int>(i);
    r.argv = argvs[i];
    r.env = env;
    r.console = false;
    plan.ranks.push_back(r);
  }
  return plan;
}

/// A hook whose "remote node" is a pipe: a byte written to it is a failure elsewhere.
class PipeHooks : public air::SupervisorHooks {
public:
  PipeHooks() {
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
    read_ = fds[0];
    write_ = fds[1];
  }
  ~PipeHooks() override {
    ::close(read_);
    ::close(write_);
  }
  PipeHooks(const PipeHooks&) = delete;
  PipeHooks& operator=(const PipeHooks&) = delete;

  void remote_fails() { REQUIRE(::write(write_, "x", 1) == 1); }

  std::vector<int> poll_fds() const override { return {read_}; }
  std::optional<Clock::time_point> next_deadline() const override { return wake_at; }
  std::vector<air::JobEvent> check(Clock::time_point now) override {
    ++checks;
    if (wake_at && now >= *wake_at) {
      wake_at.reset();
      ++deadline_wakeups;
      remote_fails();
    }
    char c;
    if (::read(read_, &c, 1) != 1) return {};
    air::RemoteFailure f;
    f.node_rank = 1;
    f.node_name = "beta";
    f.rank = 3;
    f.exit_code = 5;
    f.reason = "rank 3 exited with exit code 5";
    return {air::JobEvent::failed_with(f)};
  }
  std::vector<air::JobEvent> tell(const air::NodeEvent& event, Clock::time_point) override {
    if (event.kind == air::NodeEvent::Kind::failed) {
      ++local_failures;
      last_reason = event.outcome->reason;
      last_code = event.outcome->exit_code();
    }
    return {};
  }

  bool others_may_tell() const override { return others; }

  std::optional<Clock::time_point> wake_at;
  bool others = false; ///< whether another node may still tell a lost peer's cause
  int checks = 0;
  int deadline_wakeups = 0;
  int local_failures = 0;
  std::string last_reason;
  int last_code = 0;

private:
  int read_ = -1;
  int write_ = -1;
};

air::ConsoleOptions quiet() {
  air::ConsoleOptions console;
  console.stdout_fd = STDERR_FILENO;
  return console;
}

} // namespace

TEST_CASE("a remote failure tears the local ranks down and sets the exit code", "[supervisor][hooks]") {
  auto plan = plan_of({{fixture("sleep_forever")}, {fixture("sleep_forever")}});
  PipeHooks hooks;
  hooks.wake_at = Clock::now() + 300ms; // the deadline itself must wake the loop
  const auto start = Clock::now();
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  CHECK(Clock::now() - start < 4s);
  CHECK(hooks.deadline_wakeups == 1);
  CHECK(out.status == air::RunOutcome::Status::failed);
  CHECK(out.root_cause_rank == -1);
  REQUIRE(out.remote_failure.has_value());
  CHECK(out.remote_failure->node_rank == 1);
  CHECK(out.exit_code() == 5);
  CHECK(out.reason == "stopped because node 1 (beta) failed: rank 3 exited with exit code 5");
  for (const auto& r : out.ranks) {
    CHECK(r.stopped_by_air_run);
    CHECK(r.status.kind == air::ExitStatus::Kind::signaled);
    CHECK(r.status.signal == SIGTERM);
  }
  CHECK(hooks.local_failures == 0); // the failure was not ours: nothing to tell
}

TEST_CASE("a local failure is told to the hooks once, as soon as it happens", "[supervisor][hooks]") {
  auto plan = plan_of({{fixture("exit_with"), "7"}, {fixture("sleep_forever")}});
  PipeHooks hooks;
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  CHECK(out.status == air::RunOutcome::Status::failed);
  CHECK(out.exit_code() == 7);
  CHECK_FALSE(out.remote_failure.has_value());
  CHECK(hooks.local_failures == 1);
  CHECK(hooks.last_code == 7);
  CHECK(hooks.last_reason == "rank 0 exited with exit code 7");
  CHECK(hooks.checks > 0);
}

TEST_CASE("a pending remote failure is judged before local exits", "[supervisor][hooks]") {
  auto plan = plan_of({{fixture("exit_with"), "3"}});
  PipeHooks hooks;
  hooks.remote_fails(); // already waiting when the loop first wakes
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  REQUIRE(out.remote_failure.has_value());
  CHECK(out.exit_code() == 5);
  CHECK(hooks.local_failures == 0);
}

TEST_CASE("a remote failure after a local one changes nothing", "[supervisor][hooks]") {
  // Rank 1 ignores SIGTERM (rank 0 fails late enough for it to be set up), so
  // the loop runs on through the grace period, past the remote failure.
  // Generous margins: on a freshly booted VM a shell can take hundreds of ms to start.
  auto plan = plan_of({{"/bin/sh", "-c", "sleep 0.5; exit 3"}, {fixture("ignore_term")}});
  plan.grace_period = air::Millis(4'000);
  PipeHooks hooks;
  hooks.wake_at = Clock::now() + 2'500ms;
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  CHECK(hooks.deadline_wakeups == 1);
  CHECK_FALSE(out.remote_failure.has_value());
  CHECK(out.root_cause_rank == 0);
  CHECK(out.exit_code() == 3);
  CHECK(hooks.local_failures == 1);
}

TEST_CASE("a remote failure outranks a local rank that only lost its peer", "[supervisor][hooks]") {
  // Rank 0 fails at once saying its peer went away; while air-run waits for
  // the cause (1 s), node 1 reports the failure that caused it.
  auto plan = plan_of({{"/bin/sh", "-c", "echo 'RuntimeError: Connection reset by peer' >&2; exit 1"},
                       {fixture("sleep_forever")}});
  plan.tail_lines = 10;
  PipeHooks hooks;
  hooks.wake_at = Clock::now() + 600ms; // after rank 0's failure, within the 1 s wait
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  REQUIRE(out.remote_failure.has_value());
  CHECK(out.root_cause_rank == -1);
  CHECK(out.exit_code() == 5);
  CHECK(out.reason == "stopped because node 1 (beta) failed: rank 3 exited with exit code 5");
  CHECK(out.ranks[0].status.code == 1);
  CHECK(out.ranks[1].stopped_by_air_run);
  CHECK(hooks.local_failures == 0); // a symptom of node 1's failure is not news to node 1
}

// One rank per node: its end ends every local rank at once, but the cause (a
// lost node's closed connection, its `fail`) comes from the job.
TEST_CASE("a lone rank that lost its peer waits for another node's word", "[supervisor][hooks]") {
  auto plan = plan_of({{"/bin/sh", "-c", "echo 'RuntimeError: Connection closed by peer' >&2; exit 1"}});
  plan.tail_lines = 10;
  PipeHooks hooks;
  hooks.others = true;
  hooks.wake_at = Clock::now() + 600ms; // after the rank's end, within the 1 s wait
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  REQUIRE(out.remote_failure.has_value());
  CHECK(out.root_cause_rank == -1);
  CHECK(out.reason == "stopped because node 1 (beta) failed: rank 3 exited with exit code 5");
  CHECK(hooks.local_failures == 0);
}

TEST_CASE("a lone rank that lost its peer is the cause when no other node can tell", "[supervisor][hooks]") {
  auto plan = plan_of({{"/bin/sh", "-c", "echo 'RuntimeError: Connection closed by peer' >&2; exit 1"}});
  plan.tail_lines = 10;
  PipeHooks hooks; // others: false, as for one node
  const auto start = Clock::now();
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  CHECK(Clock::now() - start < 900ms); // no wait: every rank has ended
  CHECK_FALSE(out.remote_failure.has_value());
  CHECK(out.root_cause_rank == 0);
  CHECK(hooks.local_failures == 1);
}

TEST_CASE("without a failure the hooks are only polled", "[supervisor][hooks]") {
  auto plan = plan_of({{fixture("exit_with"), "0"}, {fixture("exit_with"), "0"}});
  PipeHooks hooks;
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  CHECK(out.status == air::RunOutcome::Status::succeeded);
  CHECK(out.exit_code() == 0);
  CHECK(hooks.local_failures == 0);
}

namespace {

/// Hooks of a node in a job-wide hang diagnosis (core/cluster/control.hpp
/// does it over the network): records what the supervisor tells, and plays
/// node 0's question and answer.
class JobHangHooks : public air::SupervisorHooks {
public:
  std::vector<int> poll_fds() const override { return {}; }
  std::optional<Clock::time_point> next_deadline() const override { return std::nullopt; }
  std::vector<air::JobEvent> check(Clock::time_point) override { return due(); }
  std::vector<air::JobEvent> tell(const air::NodeEvent& event, Clock::time_point) override {
    switch (event.kind) {
    case air::NodeEvent::Kind::failed:
      told_status = event.outcome->status;
      break;
    case air::NodeEvent::Kind::quiet:
      ++quiet_calls;
      break;
    case air::NodeEvent::Kind::placed:
      placed.push_back(event.places);
      break;
    default:
      break;
    }
    return due();
  }
  bool job_wide_hangs() const override { return true; }
  /// Node 0's question once, then its picture once this node placed its ranks.
  std::vector<air::JobEvent> due() {
    std::vector<air::JobEvent> events;
    if (std::exchange(ask, false)) events.push_back(air::JobEvent::of(air::JobEvent::Kind::places_asked));
    if (auto job = job_places()) events.push_back(air::JobEvent::places_of(std::move(*job)));
    return events;
  }
  std::optional<air::JobPlaces> job_places() {
    if (!answer || placed.empty()) return std::nullopt;
    answer = false;
    // This node's ranks waiting, and node 1's rank 5 stuck outside the collective.
    air::JobPlaces job;
    for (air::HangRank r : placed.back()) {
      r.node = 0;
      r.in_collective = true;
      r.collective = "all_reduce";
      r.collective_seq = 4;
      job.ranks.push_back(r);
    }
    air::HangRank stuck;
    stuck.rank = 5;
    stuck.node = 1;
    stuck.counted = true;
    stuck.collective_seq = 3;
    stuck.place = "stuck_here at stuck.py:7";
    job.ranks.push_back(stuck);
    return job;
  }

  bool ask = false;    ///< node 0 asks for this node's places
  bool answer = false; ///< node 0's picture comes once this node placed its ranks
  int quiet_calls = 0;
  std::vector<std::vector<air::HangRank>> placed;
  std::optional<air::RunOutcome::Status> told_status;
};

} // namespace

TEST_CASE("across nodes a quiet node tells node 0 and stops on the job's verdict",
          "[supervisor][hooks][hang]") {
  // One line, then silence: quiet after the hang timeout.
  auto plan =
      plan_of({{"/bin/sh", "-c", "echo up; exec sleep 30"}, {"/bin/sh", "-c", "echo up; exec sleep 30"}});
  plan.hang_timeout = air::Millis(500);
  plan.stop_on_hang = true;
  JobHangHooks hooks;
  hooks.answer = true;
  const auto start = Clock::now();
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  CHECK(Clock::now() - start < 10s);
  CHECK(out.hang.has_value());
  if (out.hang) CHECK(out.hang->quiet_s < 1.0); // the verdict follows the diagnosis at once
  CHECK(hooks.quiet_calls == 1);
  REQUIRE(hooks.placed.size() == 1);
  CHECK(hooks.placed[0].size() == 2);
  CHECK(out.status == air::RunOutcome::Status::hung);
  CHECK(out.exit_code() == 124);
  CHECK(hooks.told_status == air::RunOutcome::Status::hung); // node 0 tells the others with `hung`
  REQUIRE(out.hang.has_value());
  CHECK(out.hang->diagnosis.laggards == std::vector<int>{5});
  CHECK(out.hang->diagnosis.line.rfind("rank 5 (node 1) is in stuck_here at stuck.py:7", 0) == 0);
  CHECK(out.hang->ranks.size() == 3);
  CHECK(out.reason == "hung: no progress for 500ms; the others wait for rank 5");
}

TEST_CASE("across nodes a node's own diagnosis does not stop it", "[supervisor][hooks][hang]") {
  // No verdict from node 0 within the run: the ranks end on their own.
  auto plan = plan_of({{"/bin/sh", "-c", "echo up; exec sleep 2"}});
  plan.hang_timeout = air::Millis(300);
  plan.stop_on_hang = true;
  JobHangHooks hooks;
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  CHECK(hooks.quiet_calls == 1);
  CHECK(hooks.placed.size() == 1);
  CHECK(out.status == air::RunOutcome::Status::succeeded);
  REQUIRE(out.hang.has_value()); // its own picture, in its own summary
  CHECK(out.hang->ranks.size() == 1);
}

TEST_CASE("across nodes node 0's question is answered by a node that is not quiet, after a work window",
          "[supervisor][hooks][hang]") {
  // The window is a second: the rank outlives it.
  auto plan = plan_of({{"/bin/sh", "-c", "echo up; exec sleep 3"}});
  plan.hang_timeout = air::Millis(60'000);
  JobHangHooks hooks;
  hooks.ask = true;
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  CHECK(hooks.quiet_calls == 0);
  REQUIRE(hooks.placed.size() == 1);
  CHECK(hooks.placed[0].size() == 1);
  CHECK(hooks.placed[0][0].rank == 0);
  CHECK(hooks.placed[0][0].working); // it wrote output within the hang timeout: not quiet
  CHECK(out.status == air::RunOutcome::Status::succeeded);
}

TEST_CASE("across nodes a node asked for its places measures which ranks work",
          "[supervisor][hooks][hang][quiet]") {
  // Rank 0 sleeps, rank 1 spins a core (a child of its own, kept in its
  // process group by --foreground, as a checkpoint writer would be); neither
  // prints. Node 0 asks at once: the window starts then.
  auto plan = plan_of({{"/bin/sh", "-c", "exec sleep 4"},
                       {"/bin/sh", "-c", "timeout --foreground 4 sh -c 'while :; do :; done'; exit 0"}});
  plan.hang_timeout = air::Millis(60'000);
  JobHangHooks hooks;
  hooks.ask = true;
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  REQUIRE(hooks.placed.size() == 1);
  REQUIRE(hooks.placed[0].size() == 2);
  CHECK_FALSE(hooks.placed[0][0].working);
  CHECK(hooks.placed[0][1].working);
  CHECK_FALSE(hooks.placed[0][1].exited_ok);
  CHECK(out.status == air::RunOutcome::Status::succeeded);
}
