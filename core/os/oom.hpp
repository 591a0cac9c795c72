#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// Reads the `oom_kill N` counter from the text of a cgroup v2
/// `memory.events` file or a cgroup v1 `memory.oom_control` file (both are
/// "key value" lines). nullopt when the key is absent or malformed.
std::optional<std::uint64_t> parse_oom_kill_count(std::string_view text);

/// The files that hold this process's memory-cgroup OOM-kill counter, best
/// first, given the text of /proc/self/cgroup: the v2 entry ("0::/path")
/// gives <root>/<path>/memory.events and memory.events.local, the v1 memory
/// entry ("N:memory:/path") gives <root>/memory/<path>/memory.oom_control.
std::vector<std::string> oom_counter_paths(std::string_view proc_self_cgroup,
                                           const std::string& cgroup_root = "/sys/fs/cgroup");

/// The current OOM-kill count of air-run's own memory cgroup, which the ranks
/// share, or nullopt where the kernel does not tell. A rank that dies of a
/// SIGKILL nobody in air-run sent, while this counter rose, was OOM-killed:
/// the kernel gives no per-process flag, so this is the best evidence there is.
std::optional<std::uint64_t> read_oom_kill_count();

/// The OOM-kill count of the run's own cgroup (`<run_cgroup_dir>/memory.events`,
/// where the memory controller is on for it): kills of the run's processes
/// only, a rank's DataLoader workers included. nullopt where there is none.
std::optional<std::uint64_t> read_run_cgroup_oom_kills(const std::string& run_cgroup_dir);

} // namespace air
