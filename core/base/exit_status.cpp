#include "core/base/exit_status.hpp"

#include <sys/wait.h>

#include <csignal>
#include <cstring>
#include <string>

namespace air {

ExitStatus ExitStatus::from_wait_status(int wstatus) {
  if (WIFEXITED(wstatus)) return exited_with(WEXITSTATUS(wstatus));
  if (WIFSIGNALED(wstatus)) {
    ExitStatus s = killed_by(WTERMSIG(wstatus));
    s.core_dumped = WCOREDUMP(wstatus);
    return s;
  }
  return {};
}

int ExitStatus::shell_code() const {
  switch (kind) {
  case Kind::exited:
    return code;
  case Kind::signaled:
    return 128 + signal;
  case Kind::not_exited:
    break;
  }
  return 1;
}

std::string signal_name(int sig) {
  // sigabbrev_np is glibc >= 2.32; both Debian 12 and Ubuntu 24.04 have it.
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "SIG" + std::to_string(sig);
  return std::string("SIG") + abbrev;
}

std::string ExitStatus::describe() const {
  switch (kind) {
  case Kind::exited:
    return "exit code " + std::to_string(code);
  case Kind::signaled:
    return "signal " + std::to_string(signal) + " (" + signal_name(signal) +
           (core_dumped ? ", core dumped)" : ")");
  case Kind::not_exited:
    break;
  }
  return "still running";
}

} // namespace air
