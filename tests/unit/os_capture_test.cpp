// run_captured: the helper runner the preflight uses for air-nccl-check.
#include "core/os/capture.hpp"
#include "tests/unit/catch.hpp"

#include <chrono>
#include <csignal>

using namespace std::chrono_literals;

namespace {
air::Environment plain_env() { return {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hi"}}; }
} // namespace

TEST_CASE("run_captured collects stdout, stderr and the exit code", "[capture]") {
  auto run =
      air::run_captured({"/bin/sh", "-c", "echo out $GREETING; echo err >&2; exit 3"}, plain_env(), 10s);
  REQUIRE(run.ok());
  CHECK(run->out == "out hi\n");
  CHECK(run->err == "err\n");
  CHECK(run->status.kind == air::ExitStatus::Kind::exited);
  CHECK(run->status.code == 3);
  CHECK_FALSE(run->timed_out);
}

TEST_CASE("run_captured kills a helper at the deadline, with its children", "[capture]") {
  const auto started = std::chrono::steady_clock::now();
  // The grandchild keeps the pipes open: only killing the group ends it.
  auto run = air::run_captured({"/bin/sh", "-c", "echo started; sleep 30 & sleep 30"}, plain_env(), 300ms);
  REQUIRE(run.ok());
  CHECK(run->timed_out);
  CHECK(run->out == "started\n");
  CHECK(run->status.kind == air::ExitStatus::Kind::signaled);
  CHECK(run->status.signal == SIGKILL);
  CHECK(std::chrono::steady_clock::now() - started < 10s); // generous: the deadline is 0.3 s
}

TEST_CASE("run_captured caps what it keeps but drains the rest", "[capture]") {
  auto run =
      air::run_captured({"/bin/sh", "-c", "head -c 300000 /dev/zero; echo done >&2"}, plain_env(), 10s, 1000);
  REQUIRE(run.ok());
  CHECK(run->out.size() == 1000);
  CHECK(run->err == "done\n");
  CHECK(run->status.success());
}

TEST_CASE("run_captured reports a missing helper like a missing target", "[capture]") {
  auto run = air::run_captured({"/nonexistent/air-nccl-check"}, plain_env(), 10s);
  REQUIRE_FALSE(run.ok());
  CHECK(run.error().kind == air::ErrorKind::not_found);
}

TEST_CASE("run_captured ticks while a helper is silent", "[capture]") {
  air::CaptureOptions options;
  options.tick_interval = 50ms;
  int ticks = 0;
  options.on_tick = [&ticks] { ++ticks; };
  auto run = air::run_captured({"/bin/sh", "-c", "sleep 0.5"}, plain_env(), options);
  REQUIRE(run.ok());
  CHECK(run->status.code == 0);
  // 0.5 s of silence at one tick per 50 ms: several ticks, not one per output chunk.
  CHECK(ticks >= 4);
  CHECK(ticks <= static_cast<int>(run->duration_s / 0.05) + 1); // at most one per interval
}
