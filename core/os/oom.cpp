#include "core/os/oom.hpp"

#include <fstream>
#include <sstream>

namespace air {

namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace

std::optional<std::uint64_t> parse_oom_kill_count(std::string_view text) {
  while (!text.empty()) {
    const auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    constexpr std::string_view key = "oom_kill ";
    if (line.substr(0, key.size()) != key) continue;
    line.remove_prefix(key.size());
    if (line.empty()) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : line) {
      if (c < '0' || c > '9') return std::nullopt;
      value = value * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return value;
  }
  return std::nullopt;
}

std::vector<std::string> oom_counter_paths(std::string_view proc_self_cgroup,
                                           const std::string& cgroup_root) {
  std::vector<std::string> v2, v1;
  while (!proc_self_cgroup.empty()) {
    const auto eol = proc_self_cgroup.find('\n');
    const std::string_view line = proc_self_cgroup.substr(0, eol);
    proc_self_cgroup.remove_prefix(eol == std::string_view::npos ? proc_self_cgroup.size() : eol + 1);
    // "hierarchy-id:controllers:path"; the path itself may contain ':'.
    const auto first = line.find(':');
    if (first == std::string_view::npos) continue;
    const auto second = line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view id = line.substr(0, first);
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    std::string path(line.substr(second + 1));
    if (path == "/") path.clear();
    if (id == "0" && controllers.empty()) {
      v2.push_back(cgroup_root + path + "/memory.events");
      v2.push_back(cgroup_root + path + "/memory.events.local");
    } else {
      // controllers is a comma-separated list ("memory" or "cpu,cpuacct").
      std::string_view rest = controllers;
      while (!rest.empty()) {
        const auto comma = rest.find(',');
        if (rest.substr(0, comma) == "memory") {
          v1.push_back(cgroup_root + "/memory" + path + "/memory.oom_control");
          break;
        }
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    }
  }
  // On a hybrid host the v1 memory controller is the one that enforces limits.
  std::vector<std::string> out = v1;
  out.insert(out.end(), v2.begin(), v2.end());
  return out;
}

std::optional<std::uint64_t> read_run_cgroup_oom_kills(const std::string& run_cgroup_dir) {
  if (run_cgroup_dir.empty()) return std::nullopt;
  const auto text = read_text(run_cgroup_dir + "/memory.events");
  return text ? parse_oom_kill_count(*text) : std::nullopt;
}

std::optional<std::uint64_t> read_oom_kill_count() {
  const auto self = read_text("/proc/self/cgroup");
  if (!self) return std::nullopt;
  for (const auto& path : oom_counter_paths(*self)) {
    const auto text = read_text(path);
    if (!text) continue;
    if (auto count = parse_oom_kill_count(*text)) return count;
  }
  return std::nullopt;
}

} // namespace air
