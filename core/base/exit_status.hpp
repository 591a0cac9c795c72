#pragma once

#include <string>

namespace air {

/// A decoded wait status: exited with a code, or killed by a signal. Never a
/// raw int, so a signal is never collapsed into "exit 1".
struct ExitStatus {
  enum class Kind { not_exited, exited, signaled };
  Kind kind = Kind::not_exited;
  int code = 0;   ///< exit code when exited
  int signal = 0; ///< signal number when signaled
  bool core_dumped = false;

  static ExitStatus from_wait_status(int wstatus);
  static ExitStatus exited_with(int code) { return {Kind::exited, code, 0, false}; }
  static ExitStatus killed_by(int sig) { return {Kind::signaled, 0, sig, false}; }

  bool success() const { return kind == Kind::exited && code == 0; }
  /// Shell convention: the code, or 128+N for signal N.
  int shell_code() const;
  /// "exit code 3", "signal 9 (SIGKILL)", "signal 11 (SIGSEGV, core dumped)".
  std::string describe() const;
};

/// "SIGTERM" for 15; "SIG42" for unnamed numbers.
std::string signal_name(int sig);

} // namespace air
