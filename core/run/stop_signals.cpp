// Which stop signals are one request.
#include "core/run/stop_signals.hpp"

#include <csignal>
#include <cstdlib>

namespace air {

bool is_warning_signal(int sig) { return sig == SIGUSR1 || sig == SIGUSR2; }

StopVerdict StopSignals::hear(int sig, Clock::time_point now) {
  StopVerdict verdict = StopVerdict::now;
  if (first_ == 0) {
    first_ = sig;
    anchor_ = now;
    verdict = StopVerdict::first;
  } else if (is_warning_signal(sig) || now - anchor_ < k_stop_burst) {
    verdict = StopVerdict::same;
  } else if (is_warning_signal(first_) && !interrupted_) {
    anchor_ = now; // the interrupt's own burst (slurmd's pair) follows it
    verdict = StopVerdict::follows;
  }
  if (!is_warning_signal(sig)) interrupted_ = true;
  return verdict;
}

std::string slurm_stop_cause(int sig, const char* job_end_time, std::time_t now) {
  if (job_end_time == nullptr || *job_end_time == '\0') return "";
  char* end = nullptr;
  const long long limit = std::strtoll(job_end_time, &end, 10);
  if (*end != '\0' || limit <= 0) return "";
  // A second early: the variable is whole seconds and the limit's own check
  // may round the other way.
  if (sig == SIGTERM && now + 1 >= limit) return "time_limit";
  if (is_warning_signal(sig) && now < limit) return "time_limit_warning";
  return "";
}

} // namespace air
