#include "core/base/exit_status.hpp"
#include "tests/unit/catch.hpp"

#include <csignal>

TEST_CASE("exit status decodes codes and signals", "[exit_status]") {
  using air::ExitStatus;
  CHECK(ExitStatus::exited_with(3).shell_code() == 3);
  CHECK(ExitStatus::killed_by(SIGKILL).shell_code() == 137);
  CHECK(ExitStatus::killed_by(SIGTERM).describe() == "signal 15 (SIGTERM)");
  CHECK(ExitStatus::exited_with(0).success());
  CHECK_FALSE(ExitStatus::killed_by(SIGTERM).success());
  CHECK(air::signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(air::signal_name(SIGUSR1) == "SIGUSR1");
  CHECK(air::signal_name(SIGPWR) == "SIGPWR");
  CHECK(air::signal_name(SIGRTMIN + 1) == "SIG" + std::to_string(SIGRTMIN + 1));
}
