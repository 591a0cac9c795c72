#include "core/mlflow/retry.hpp"
#include "tests/unit/catch.hpp"

#include <pthread.h>

#include <chrono>
#include <csignal>

TEST_CASE("an interrupt ends the wait when another interrupt signal is left unblocked (nohup)", "[mlflow]") {
  // Under nohup SIGHUP is inherited as ignored, and air-run leaves it
  // unblocked (supervised_signals): a SIGINT or SIGTERM must still end a wait
  // for the store (a Ctrl-C during the MLflow run's end once waited for the
  // store's whole answer there).
  struct sigaction ignore {};
  struct sigaction old_hup {};
  ignore.sa_handler = SIG_IGN;
  REQUIRE(sigaction(SIGHUP, &ignore, &old_hup) == 0);
  sigset_t blocked;
  sigset_t hup;
  sigset_t old_mask;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &blocked, &old_mask) == 0);
  REQUIRE(pthread_sigmask(SIG_UNBLOCK, &hup, nullptr) == 0);

  REQUIRE(pthread_kill(pthread_self(), SIGTERM) == 0); // pending on this thread until taken
  CHECK(air::mlflow::interrupt_pending());
  const auto started = std::chrono::steady_clock::now();
  CHECK(air::mlflow::wait_for_interrupt(std::chrono::seconds(5)) == SIGTERM);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(4));
  CHECK_FALSE(air::mlflow::interrupt_pending());
  // Nothing pending: the delay passes.
  CHECK(air::mlflow::wait_for_interrupt(std::chrono::milliseconds(20)) == 0);

  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
}
