// When and how long to retry a tracking server.
#include "core/mlflow/retry.hpp"

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <iterator>

namespace air::mlflow {

namespace {

/// The signals that end a wait for the store: air-run's interrupts.
constexpr int k_interrupt_signals[] = {SIGINT, SIGTERM, SIGHUP};

} // namespace

Verdict judge_attempt(long status) {
  if (status == 0 || status == 408 || status == 429 || status >= 500) return Verdict::retry;
  return Verdict::done;
}

std::chrono::milliseconds backoff_delay(int attempt) {
  const int shift = std::clamp(attempt, 0, 3);
  return std::chrono::milliseconds(250 << shift);
}

int wait_for_interrupt(std::chrono::milliseconds delay) {
  // Only the interrupt signals this thread blocks can be waited for: air-run
  // leaves one it inherited as ignored unblocked (SIGHUP under nohup), and
  // the others must still end the wait then.
  sigset_t blocked;
  sigprocmask(SIG_BLOCK, nullptr, &blocked);
  sigset_t set;
  sigemptyset(&set);
  bool any_blocked = false;
  for (const int sig : k_interrupt_signals) {
    if (sigismember(&blocked, sig) == 1) {
      sigaddset(&set, sig);
      any_blocked = true;
    }
  }
  timespec ts{static_cast<std::time_t>(delay.count() / 1000),
              static_cast<long>(delay.count() % 1000) * 1'000'000L};
  if (!any_blocked) { // not air-run's usual mask (a test): a plain sleep
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    return 0;
  }
  for (;;) {
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig > 0) return sig;
    if (errno != EINTR) return 0; // EAGAIN: the delay passed
  }
}

bool interrupt_pending() {
  sigset_t pending;
  if (sigpending(&pending) != 0) return false;
  return std::any_of(std::begin(k_interrupt_signals), std::end(k_interrupt_signals),
                     [&pending](int sig) { return sigismember(&pending, sig) == 1; });
}

} // namespace air::mlflow
