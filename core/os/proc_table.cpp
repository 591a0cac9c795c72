#include "core/os/proc_table.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>

namespace air {

namespace {

bool read_stat(const char* pid, ProcEntry& entry) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%s/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return false;
  return parse_proc_stat(std::string_view(buf, static_cast<std::size_t>(n)), entry);
}

/// Up to `max` bytes of /proc/<pid>/<what>; "" when unreadable.
std::string read_proc_file(pid_t pid, const char* what, std::size_t max) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/%s", static_cast<int>(pid), what);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text(max, '\0');
  ssize_t n;
  do {
    n = ::read(fd, text.data(), max);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return text;
}

/// `text` with NULs as blanks, other control characters dropped, no blank at the end.
std::string printable(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '\0' || c == '\n' || c == '\t')
      out += ' ';
    else if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f)
      out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

} // namespace

std::string describe_process(pid_t pid, std::size_t max_bytes) {
  std::string out = "pid " + std::to_string(pid);
  const std::string name = printable(read_proc_file(pid, "comm", 64));
  if (!name.empty()) out += " " + name;
  std::string command = printable(read_proc_file(pid, "cmdline", max_bytes + 1));
  if (command.size() > max_bytes) {
    command.resize(max_bytes);
    command += "...";
  }
  if (!command.empty()) out += " (" + command + ")";
  return out;
}

bool parse_proc_stat(std::string_view text, ProcEntry& entry) {
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return false;
  const std::string head(text.substr(0, open));
  const std::string rest(text.substr(close + 1));
  long pid = 0;
  if (std::sscanf(head.c_str(), "%ld", &pid) != 1) return false;
  char state = 0;
  long ppid = 0;
  long pgid = 0;
  long sid = 0;
  unsigned long long start = 0;
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  long long cutime = 0;
  long long cstime = 0;
  // Fields 3-6, 14-17 and 22 (proc(5)): state, ppid, pgrp, session, ...,
  // utime, stime, cutime, cstime, ..., starttime.
  if (std::sscanf(rest.c_str(),
                  " %c %ld %ld %ld %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld %*d %*d %*d %*d %llu",
                  &state, &ppid, &pgid, &sid, &utime, &stime, &cutime, &cstime, &start) != 9)
    return false;
  entry.cpu_ticks = utime + stime + static_cast<unsigned long long>(std::max(cutime, 0LL)) +
                    static_cast<unsigned long long>(std::max(cstime, 0LL));
  entry.pid = static_cast<pid_t>(pid);
  entry.ppid = static_cast<pid_t>(ppid);
  entry.pgid = static_cast<pid_t>(pgid);
  entry.sid = static_cast<pid_t>(sid);
  entry.start = start;
  entry.zombie = state == 'Z' || state == 'X';
  return true;
}

namespace {

/// The text of a small /proc file, "" when it cannot be read.
std::string read_proc_text(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() > 64 * 1024) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return text;
}

/// The number after `key` ("rchar: ") at a line's start in `text`.
std::optional<std::uint64_t> field_after(std::string_view text, std::string_view key) {
  std::size_t at = 0;
  while ((at = text.find(key, at)) != std::string_view::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      unsigned long long value = 0;
      const std::string rest(text.substr(at + key.size(), 32));
      if (std::sscanf(rest.c_str(), "%llu", &value) == 1) return value;
      return std::nullopt;
    }
    at += key.size();
  }
  return std::nullopt;
}

} // namespace

std::optional<std::uint64_t> read_proc_io_bytes(pid_t pid) {
  const std::string text = read_proc_text("/proc/" + std::to_string(pid) + "/io");
  const auto read = field_after(text, "rchar: ");
  const auto written = field_after(text, "wchar: ");
  if (!read || !written) return std::nullopt;
  return *read + *written;
}

bool status_catches_signal(std::string_view status, int sig) {
  if (sig < 1 || sig > 64) return false;
  constexpr std::string_view key = "SigCgt:";
  std::size_t at = 0;
  while ((at = status.find(key, at)) != std::string_view::npos && at != 0 && status[at - 1] != '\n')
    at += key.size();
  if (at == std::string_view::npos) return false;
  std::size_t begin = at + key.size();
  while (begin < status.size() && (status[begin] == ' ' || status[begin] == '\t')) ++begin;
  std::size_t end = begin;
  while (end < status.size() && std::isxdigit(static_cast<unsigned char>(status[end]))) ++end;
  if (end == begin || end - begin > 16) return false;
  const std::string hex(status.substr(begin, end - begin));
  const unsigned long long mask = std::strtoull(hex.c_str(), nullptr, 16);
  return (mask >> (sig - 1)) & 1ULL;
}

bool catches_signal(pid_t pid, int sig) {
  return status_catches_signal(read_proc_text("/proc/" + std::to_string(pid) + "/status"), sig);
}

std::vector<ProcEntry> read_proc_table() {
  std::vector<ProcEntry> table;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return table;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    ProcEntry entry;
    if (read_stat(e->d_name, entry)) table.push_back(entry);
  }
  ::closedir(dir);
  return table;
}

bool read_proc_entry(pid_t pid, ProcEntry& entry) {
  const std::string name = std::to_string(pid);
  return read_stat(name.c_str(), entry);
}

std::vector<ProcEntry> live_descendants(const std::vector<ProcEntry>& table, const std::vector<pid_t>& roots,
                                        const std::vector<pid_t>& skip) {
  std::unordered_multimap<pid_t, const ProcEntry*> children;
  for (const auto& e : table) children.emplace(e.ppid, &e);
  std::vector<ProcEntry> found;
  std::vector<pid_t> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    const pid_t parent = stack.back();
    stack.pop_back();
    const auto [first, last] = children.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      const ProcEntry& child = *it->second;
      if (child.pid == parent || std::find(skip.begin(), skip.end(), child.pid) != skip.end()) continue;
      stack.push_back(child.pid);
      if (!child.zombie) found.push_back(child);
    }
  }
  return found;
}

std::vector<ProcEntry> members_of(const std::vector<ProcEntry>& table, const std::set<pid_t>& sessions,
                                  const std::set<pid_t>& groups) {
  std::vector<ProcEntry> found;
  if (sessions.empty() && groups.empty()) return found;
  for (const auto& e : table)
    if (!e.zombie && (sessions.count(e.sid) != 0 || groups.count(e.pgid) != 0)) found.push_back(e);
  return found;
}

} // namespace air
