// --signals-to-handle: names parsed (core/spec/torchrun_values) and the one
// signal-to-action table (core/run/signal_actions).
#include "core/run/signal_actions.hpp"
#include "core/spec/torchrun_values.hpp"
#include "tests/unit/catch.hpp"

#include <csignal>

using air::SignalAction;

TEST_CASE("signal lists are read as torchrun reads them, SIG names only", "[signals][torchrun]") {
  auto ok = air::parse_signal_list("SIGTERM,SIGINT,SIGHUP,SIGQUIT", "--signals-to-handle");
  REQUIRE(ok.ok());
  CHECK(*ok == std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT});
  auto spaced = air::parse_signal_list("SIGUSR1, SIGUSR2,SIGUSR1", "x");
  REQUIRE(spaced.ok());
  CHECK(*spaced == std::vector<int>{SIGUSR1, SIGUSR2}); // stripped, repeats once
  for (const char* bad : {"USR1", "10", "sigusr1", "SIGKILL", "", "SIGTERM,"}) {
    INFO(bad);
    auto r = air::parse_signal_list(bad, "--signals-to-handle");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().kind == air::ErrorKind::usage);
    CHECK(r.error().message.rfind("--signals-to-handle: ", 0) == 0);
  }
  CHECK(air::parse_signal_list("USR2", "x").error().message.find("(did you mean SIGUSR2?)") !=
        std::string::npos);
}

TEST_CASE("each signal's action: air-run's by default, the list's when given", "[signals]") {
  const std::optional<std::vector<int>> none;
  CHECK(air::signal_action(SIGTERM, none) == SignalAction::teardown);
  CHECK(air::signal_action(SIGINT, none) == SignalAction::teardown);
  CHECK(air::signal_action(SIGHUP, none) == SignalAction::teardown);
  CHECK(air::signal_action(SIGQUIT, none) == SignalAction::stacks);
  CHECK(air::signal_action(SIGUSR1, none) == SignalAction::forward);
  CHECK(air::signal_action(SIGUSR2, none) == SignalAction::forward);

  const std::optional<std::vector<int>> usr1{{SIGUSR1}};
  CHECK(air::signal_action(SIGUSR1, usr1) == SignalAction::forward);
  CHECK(air::signal_action(SIGUSR2, usr1) == SignalAction::ignore);   // not asked for
  CHECK(air::signal_action(SIGQUIT, usr1) == SignalAction::stacks);   // keeps air-run's meaning
  CHECK(air::signal_action(SIGTERM, usr1) == SignalAction::teardown); // no rank outlives air-run

  // torchrun's default list: SIGQUIT forwarded, the run stops.
  const std::optional<std::vector<int>> torchrun{{SIGTERM, SIGINT, SIGHUP, SIGQUIT}};
  CHECK(air::signal_action(SIGQUIT, torchrun) == SignalAction::teardown);
  CHECK(air::signal_action(SIGUSR1, torchrun) == SignalAction::ignore);
  CHECK(air::signal_action(SIGWINCH, torchrun) == SignalAction::ignore);
}

TEST_CASE("numa modes and filter lists", "[numa][torchrun]") {
  CHECK(*air::parse_numa_mode("core-complex", "x") == air::NumaMode::core_complex);
  CHECK(air::numa_mode_name(air::NumaMode::core_complex) == "core-complex");
  CHECK_FALSE(air::parse_numa_mode("core_complex", "x").ok());
  CHECK(air::parse_filter_list("loss,,acc ") == std::vector<std::string>{"loss", "acc "});
  CHECK(air::parse_filter_list("").empty());
}
