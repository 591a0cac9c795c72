#include "core/base/exit_status.hpp"

#include <sys/wait.h>

#include <csignal>
#include <string>
#include <string_view>
#include <utility>

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

namespace {

/// The names glibc's sigabbrev_np gives (it needs glibc 2.32; the release
/// binary is built against 2.31, see docs/install.md).
constexpr std::pair<int, std::string_view> k_signal_names[] = {
    {SIGHUP, "HUP"},       {SIGINT, "INT"},   {SIGQUIT, "QUIT"},   {SIGILL, "ILL"},   {SIGTRAP, "TRAP"},
    {SIGABRT, "ABRT"},     {SIGBUS, "BUS"},   {SIGFPE, "FPE"},     {SIGKILL, "KILL"}, {SIGUSR1, "USR1"},
    {SIGSEGV, "SEGV"},     {SIGUSR2, "USR2"}, {SIGPIPE, "PIPE"},   {SIGALRM, "ALRM"}, {SIGTERM, "TERM"},
    {SIGSTKFLT, "STKFLT"}, {SIGCHLD, "CHLD"}, {SIGCONT, "CONT"},   {SIGSTOP, "STOP"}, {SIGTSTP, "TSTP"},
    {SIGTTIN, "TTIN"},     {SIGTTOU, "TTOU"}, {SIGURG, "URG"},     {SIGXCPU, "XCPU"}, {SIGXFSZ, "XFSZ"},
    {SIGVTALRM, "VTALRM"}, {SIGPROF, "PROF"}, {SIGWINCH, "WINCH"}, {SIGPOLL, "POLL"}, {SIGPWR, "PWR"},
    {SIGSYS, "SYS"},
};

} // namespace

std::string signal_name(int sig) {
  for (const auto& [number, name] : k_signal_names) {
    if (number == sig) return "SIG" + std::string(name);
  }
  return "SIG" + std::to_string(sig); // real-time signals have no name
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
