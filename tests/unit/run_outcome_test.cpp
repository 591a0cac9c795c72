#include "core/run/outcome.hpp"
#include "tests/unit/catch.hpp"

#include <csignal>

TEST_CASE("a rank's end is the teardown's only when the signal air-run sent ended it", "[outcome]") {
  using air::ended_by_teardown_signal;
  using air::ExitStatus;
  SECTION("never signalled: never stopped") {
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::killed_by(SIGTERM), 0));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(0), 0));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(1), 0));
  }
  SECTION("died of the signal sent, or of the SIGKILL after the grace period") {
    CHECK(ended_by_teardown_signal(ExitStatus::killed_by(SIGTERM), SIGTERM));
    CHECK(ended_by_teardown_signal(ExitStatus::killed_by(SIGINT), SIGINT));
    CHECK(ended_by_teardown_signal(ExitStatus::killed_by(SIGKILL), SIGTERM));
    CHECK(ended_by_teardown_signal(ExitStatus::killed_by(SIGKILL), SIGKILL));
  }
  SECTION("a wrapper's 128+N for that signal, or a clean exit after catching it") {
    CHECK(ended_by_teardown_signal(ExitStatus::exited_with(128 + SIGTERM), SIGTERM));
    CHECK(ended_by_teardown_signal(ExitStatus::exited_with(128 + SIGKILL), SIGTERM));
    CHECK(ended_by_teardown_signal(ExitStatus::exited_with(0), SIGTERM));
  }
  SECTION("its own exit code or another signal is its own failure, signal sent or not") {
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(1), SIGTERM));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(3), SIGKILL));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::exited_with(128 + SIGINT), SIGTERM));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::killed_by(SIGSEGV), SIGTERM));
    CHECK_FALSE(ended_by_teardown_signal(ExitStatus::killed_by(SIGABRT), SIGINT));
  }
}
