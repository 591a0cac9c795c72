#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace air {

/// One message from air-run to its watchdog. 16 bytes, below PIPE_BUF, so
/// each write is atomic and the watchdog never reads half a record.
struct WatchdogRecord {
  std::int32_t type = 0; ///< one of the k_watch_* values
  std::int32_t pid = 0;
  std::uint64_t start = 0; ///< the process's start time, for k_watch_process
};

inline constexpr std::int32_t k_watch_group = 1;   ///< a rank's process group id, or one a descendant made
inline constexpr std::int32_t k_watch_process = 2; ///< a descendant seen outside the groups
inline constexpr std::int32_t k_watch_end = 3;     ///< the run ended normally: stand down
inline constexpr std::int32_t k_watch_session = 4; ///< a session a descendant made (setsid)
/// A session or group (k_watch_session, or a group a descendant made) that
/// has emptied: forget it before its id can name someone else's.
inline constexpr std::int32_t k_watch_session_gone = 5;
inline constexpr std::int32_t k_watch_group_gone = 6;

/// Forks the watchdog: a process in a session of its own (so neither the
/// terminal's Ctrl-C nor a signal to a rank's group reaches it), stdio on
/// /dev/null and no other fd than the read end of a pipe and its own copy of
/// `events_fd` (none of air-run's: a control connection it held would outlive
/// air-run). The pipe's close-on-exec nonblocking write end is returned in
/// `write_fd` (-1 on failure, with the result -1).
///
/// It reads records until the pipe closes. After k_watch_end it just exits.
/// If the pipe closes without one, air-run died: the watchdog sends SIGTERM to
/// every group, every member of every session, every recorded process (same
/// start time only: pids are reused), every member of `cgroup_dir` (empty:
/// none) and every descendant of those, waits up to `grace` for them to end,
/// then SIGKILLs what is left (cgroup.kill, and each group it found a member
/// of, which a fork cannot escape) until nothing is left, removes the cgroup
/// directory and `private_dir` (the run's private folder in $TMPDIR, which
/// air-run would have removed; empty: none) and exits. Sessions and groups of
/// what it finds join the lists as it goes, except air-run's own (its session
/// is the user's terminal's). It never touches a GPU and holds no fd of
/// air-run's, so it keeps nothing alive itself.
///
/// The child allocates (glibc keeps malloc usable in a forked child) but takes
/// no other lock that a thread of air-run could hold at fork time.
///
/// `events_fd` (core/os/proc_events.hpp; -1: none) lets it follow every fork
/// below air-run as it happens, without a cgroup: a process that left its
/// rank's group and lost its parent just before air-run died is still known.
/// It takes its own copy; the caller closes the one passed.
pid_t fork_watchdog(int& write_fd, const std::string& cgroup_dir, std::chrono::milliseconds grace,
                    int events_fd = -1, const std::string& private_dir = {});

} // namespace air
