#pragma once

#include <chrono>
#include <ctime>
#include <string>

// Which stop signals are one request (docs/preemption.md, "One request,
// however it comes"). Pure: the clock is passed in. The ranks' shim makes
// the same decision (_air_run_stop_verdict in core/run/python/air_run_progress.py).

namespace air {

/// How long after a request's first signal more of them count as the same
/// request: slurmd sends SIGTERM, SIGCONT, SIGTERM within 3-10 ms on a time
/// limit and on a preemption, and a wrapper's forwarded copy comes within
/// milliseconds too; a person who means "kill now" presses again after
/// reading the line the first one printed, well over a second later. A
/// sender's pid does not tell them apart: slurmstepd sends both the burst
/// and a second scancel's signal.
inline constexpr std::chrono::milliseconds k_stop_burst{1000};

/// What a stop signal means, given the request heard so far.
enum class StopVerdict {
  first,   ///< a new request: stop (at one step, where ranks poll)
  same,    ///< part of the request already heard: nothing more to do
  follows, ///< the SIGTERM after a warning (the time limit after --signal=USR1@N): the same request
  now,     ///< a second interrupt, later than the burst: kill at once
};

/// The stop signals heard during one run: SIGTERM, SIGINT and SIGHUP
/// interrupt; SIGUSR1 and SIGUSR2 warn (Slurm's --signal), and a warning
/// never means "now".
class StopSignals {
public:
  using Clock = std::chrono::steady_clock;

  /// Judges `sig`, heard at `now`, and remembers it.
  StopVerdict hear(int sig, Clock::time_point now);
  /// Whether a request has begun.
  bool heard() const { return first_ != 0; }

private:
  int first_ = 0;            ///< the request's first signal; 0: none yet
  Clock::time_point anchor_; ///< when its burst began
  bool interrupted_ = false; ///< an interrupting signal is part of it
};

/// What a stop signal means under Slurm, from SLURM_JOB_END_TIME (the
/// job's end, in seconds since the epoch; null or not a number: "" for
/// anything): "time_limit" for a SIGTERM at or after it (slurmctld checks
/// the limit every few seconds, so it comes late, never early),
/// "time_limit_warning" for SIGUSR1 or SIGUSR2 before it (--signal=USR1@N),
/// "" otherwise (scancel, a preemption, a person).
std::string slurm_stop_cause(int sig, const char* job_end_time, std::time_t now);

/// Whether `sig` is a scheduler's warning (SIGUSR1, SIGUSR2) rather than an interrupt.
bool is_warning_signal(int sig);

} // namespace air
