#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace air {

/// Whether raw_syscall leaves errno alone. A child that shares air-run's
/// memory until exec (core/os/shared_spawn.hpp) also shares the errno of the
/// thread that started it, which keeps running: the child must not write it.
#if defined(__x86_64__)
inline constexpr bool k_raw_syscall_keeps_errno = true;
#else
inline constexpr bool k_raw_syscall_keeps_errno = false;
#endif

/// One system call: its result, or -errno on failure. On x86-64 it is the
/// `syscall` instruction itself (no libc wrapper: no errno, no cached pid, no
/// lock), so it is safe in a child that shares the parent's memory; elsewhere
/// it is libc's syscall(), fit only for a forked child.
inline long raw_syscall(long number, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0, long f = 0) {
#if defined(__x86_64__)
  long result;
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"(number), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return result;
#else
  const long result = ::syscall(number, a, b, c, d, e, f);
  return result < 0 ? -errno : result;
#endif
}

} // namespace air
