#pragma once
// Shared by the supervisor's parts' tests that signal a real child (run_teardown,
// run_stack_dumps): a child that ignores a signal and waits to be killed.

#include "tests/unit/catch.hpp"

#include <sys/types.h>
#include <unistd.h>

#include <csignal>

namespace air::test {

/// A child that ignores `sig` and pauses until killed, leading its own
/// process group when `own_group` (as a rank does); ready once this returns.
/// The caller kills and reaps it.
inline pid_t child_ignoring(int sig, bool own_group) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(sig, SIG_IGN);
    if (own_group) ::setpgid(0, 0);
    [[maybe_unused]] const auto n = ::write(ready[1], "r", 1);
    for (;;) ::pause();
  }
  if (own_group) ::setpgid(pid, pid);
  char byte;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  ::close(ready[1]);
  return pid;
}

/// A child with a do-nothing handler for `sig` (its SigCgt mask shows it, as
/// an armed rank's does for the stack signal); waits until it is installed.
inline pid_t child_catching(int sig) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct sigaction sa {};
    sa.sa_handler = [](int) {};
    ::sigaction(sig, &sa, nullptr);
    [[maybe_unused]] const auto n = ::write(ready[1], "r", 1);
    for (;;) ::pause();
  }
  char byte;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  ::close(ready[1]);
  return pid;
}

} // namespace air::test
