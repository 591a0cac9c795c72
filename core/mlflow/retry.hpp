#pragma once

#include <chrono>
#include <csignal>

namespace air::mlflow {

/// What to do after one attempt of a REST call.
enum class Verdict {
  done,  ///< an answer to act on: 2xx, or a 4xx that another try would not change
  retry, ///< worth another try: no connection, a timeout, 5xx, 429 (and 408)
};

/// Judges one attempt: `status` is the HTTP status, 0 when the transport failed.
Verdict judge_attempt(long status);

/// How long to wait before attempt `attempt` + 1 (0-based): 250 ms doubling
/// up to 2 s, so a restarting server is found quickly and a dead one is not
/// hammered. The caller's deadline bounds the total.
std::chrono::milliseconds backoff_delay(int attempt);

/// Waits up to `delay` for SIGINT, SIGTERM or SIGHUP, which air-run keeps
/// blocked outside the supervisor (those of them it inherited as ignored,
/// SIGHUP under nohup, stay unblocked and are not waited for); returns the
/// signal taken, or 0 when the delay passed. Lets a Ctrl-C end a wait for a
/// dead server at once.
int wait_for_interrupt(std::chrono::milliseconds delay);

/// A SIGINT, SIGTERM or SIGHUP is pending (blocked and not yet taken).
bool interrupt_pending();

} // namespace air::mlflow
