// The supervisor's hooks for events from other nodes, driven with real
// fixture processes and a pipe standing in for the control connection.
#include "core/run/supervisor.hpp"
#include "tests/unit/catch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string fixture(const std::string& name) { return std::string(AIR_FIXTURE_DIR) + "/" + name; }

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
  std::optional<air::RemoteFailure> check(Clock::time_point now) override {
    ++checks;
    if (wake_at && now >= *wake_at) {
      wake_at.reset();
      ++deadline_wakeups;
      remote_fails();
    }
    char c;
    if (::read(read_, &c, 1) != 1) return std::nullopt;
    air::RemoteFailure f;
    f.node_rank = 1;
    f.node_name = "beta";
    f.rank = 3;
    f.exit_code = 5;
    f.reason = "rank 3 exited with exit code 5";
    return f;
  }
  void local_failure(const air::RunOutcome& outcome) override {
    ++local_failures;
    last_reason = outcome.reason;
    last_code = outcome.exit_code();
  }

  std::optional<Clock::time_point> wake_at;
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

TEST_CASE("without a failure the hooks are only polled", "[supervisor][hooks]") {
  auto plan = plan_of({{fixture("exit_with"), "0"}, {fixture("exit_with"), "0"}});
  PipeHooks hooks;
  const air::RunOutcome out = air::supervise(plan, quiet(), &hooks);
  CHECK(out.status == air::RunOutcome::Status::succeeded);
  CHECK(out.exit_code() == 0);
  CHECK(hooks.local_failures == 0);
}
