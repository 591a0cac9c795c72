#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

namespace air {

/// One line of the process table as /proc/<pid>/stat tells it. The start
/// time (clock ticks since boot) tells a process apart from a later one that
/// got the same pid.
struct ProcEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgid = 0;
  std::uint64_t start = 0;
  bool zombie = false; ///< state Z or X: dead, waiting to be reaped
  pid_t sid = 0;       ///< session id: a process that called setsid() leads a new one
  /// CPU time in clock ticks: its own (user and system, every thread) and
  /// that of the children it reaped.
  std::uint64_t cpu_ticks = 0;
};

/// Parses one /proc/<pid>/stat text ("pid (comm) S ppid pgrp ...", where comm
/// may hold spaces and ')'). False when the text is not in that shape.
bool parse_proc_stat(std::string_view text, ProcEntry& entry);

/// "pid 4711 sleep (sleep 1000)": a process as a report names it, from its
/// /proc/<pid>/comm and cmdline (arguments joined by blanks, control
/// characters dropped, at most `max_bytes` of it). "pid 4711" when /proc no
/// longer has it.
std::string describe_process(pid_t pid, std::size_t max_bytes = 200);

/// Every process /proc shows now. A process that ends during the scan is
/// simply missing; an unreadable /proc gives an empty table.
std::vector<ProcEntry> read_proc_table();

/// The entry for `pid`, read alone; false when it is gone.
bool read_proc_entry(pid_t pid, ProcEntry& entry);

/// The bytes `pid` has read and written through system calls (rchar + wchar
/// of /proc/<pid>/io: files, pipes and sockets alike); nullopt when it is
/// gone or its io file cannot be read.
std::optional<std::uint64_t> read_proc_io_bytes(pid_t pid);

/// Whether the `SigCgt` mask of a /proc/<pid>/status text says that signal
/// `sig` has a handler installed; false when the text has no such line.
bool status_catches_signal(std::string_view status, int sig);

/// Whether process `pid` has a handler for `sig` now (/proc/<pid>/status).
/// A process that called exec after installing one has lost it: the signal's
/// default action (for a real-time signal, death) would apply.
bool catches_signal(pid_t pid, int sig);

/// The live (not zombie) processes of `table` whose parent chain reaches one
/// of `roots`, roots excluded, and none below `skip` (a process and its
/// subtree left out, such as air-run's own watchdog).
std::vector<ProcEntry> live_descendants(const std::vector<ProcEntry>& table, const std::vector<pid_t>& roots,
                                        const std::vector<pid_t>& skip = {});

/// The live processes of `table` in one of `sessions` or one of `groups`:
/// what a process that keeps changing its pid (fork, then the parent exits)
/// cannot leave. A session or group that a run's process made holds only the
/// run's processes: a session is joined by birth alone, a group only from
/// within its session.
std::vector<ProcEntry> members_of(const std::vector<ProcEntry>& table, const std::set<pid_t>& sessions,
                                  const std::set<pid_t>& groups);

} // namespace air
