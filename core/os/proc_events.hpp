#pragma once

#include "core/base/unique_fd.hpp"

#include <sys/types.h>

#include <functional>

namespace air {

/// The kernel's process events (the proc connector): every fork and exit on
/// the host as it happens, in order. What a scan now and then cannot be:
/// a process that calls setsid() and whose parent dies a moment later is
/// still known to have descended from a rank. Needs the host's network and
/// pid namespaces and CAP_NET_ADMIN (root outside a container); elsewhere the
/// socket cannot be had, or stays silent.
///
/// Returns a nonblocking close-on-exec netlink socket subscribed to the
/// events, or an empty fd where that is refused.
UniqueFd open_proc_events();

/// What one read of the events says. `process_forked`: `child` is a new
/// process (not a thread) forked by a thread of process `parent`.
struct ProcEventHandlers {
  std::function<void(pid_t parent, pid_t child)> process_forked;
  std::function<void(pid_t pid)> process_exited;
};

/// Reads every event waiting on `fd` (from open_proc_events) without
/// blocking. Returns false when the kernel dropped some for want of buffer
/// space (the caller then knows less than everything).
bool read_proc_events(int fd, const ProcEventHandlers& handlers);

} // namespace air
