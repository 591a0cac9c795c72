#include "core/run/live_status.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace air {

namespace {

constexpr const char* k_dim = "\x1b[2m";
constexpr const char* k_red = "\x1b[31m";
constexpr const char* k_reset = "\x1b[0m";

/// "40.1/80.0G", with "--" for what is unknown.
std::string memory_text(const LiveGpu& g) {
  const auto gib = [](std::uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
    return std::string(buf);
  };
  const std::string used = g.memory_used_bytes ? gib(*g.memory_used_bytes) : "--";
  const std::string total = g.memory_total_bytes ? gib(*g.memory_total_bytes) : "--";
  return used + "/" + total + "G";
}

/// "gpu0 87% 40.1/80.0G 65C".
std::string gpu_text(const LiveGpu& g) {
  std::string out = "gpu" + std::to_string(g.index) + " ";
  out += g.utilization_pct ? std::to_string(*g.utilization_pct) + "%" : "--%";
  out += " " + memory_text(g) + " ";
  out += g.temperature_c ? std::to_string(*g.temperature_c) + "C" : "--C";
  return out;
}

std::string cut(std::string text, std::size_t max) {
  if (text.size() > max) text.resize(max);
  return text;
}

} // namespace

std::string clock_text(double seconds) {
  const long long s = std::max(0LL, static_cast<long long>(std::floor(seconds)));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", s / 60, s % 60);
  return buf;
}

std::vector<std::string> render_live_status(const LiveSnapshot& snap, int width, bool color,
                                            int max_gpu_lines) {
  // One column is kept free: a line that fills the terminal leaves the cursor
  // in a pending wrap, and the erase would then clear the wrong line.
  const std::size_t max = static_cast<std::size_t>(std::max(width, 2) - 1);
  std::vector<std::string> plain;
  std::string head = "air-run: " + std::to_string(snap.running) + " running, " + std::to_string(snap.exited) +
                     " exited, " + std::to_string(snap.failed) + " failed | " + clock_text(snap.elapsed_s) +
                     " elapsed";
  if (snap.steps) {
    head += " | step " + std::to_string(*snap.steps);
    if (snap.steps_per_s) head += fmt::format(" ({:.2f}/s)", *snap.steps_per_s);
  }
  if (snap.stopping_s)
    head += " | stopping, SIGKILL in " + clock_text(std::ceil(*snap.stopping_s));
  else if (snap.left_s)
    head += " | " + clock_text(std::ceil(*snap.left_s)) + " left";
  plain.push_back(cut(std::move(head), max));

  // GPUs packed greedily; the last allowed line keeps room to say how many are left out.
  const std::size_t n = snap.gpus.size();
  const auto more = [](std::size_t left) { return " | +" + std::to_string(left) + " more"; };
  std::size_t next = 0;
  for (int gpu_line = 0; next < n && gpu_line < max_gpu_lines; ++gpu_line) {
    const bool last = gpu_line + 1 == max_gpu_lines;
    std::string line;
    while (next < n) {
      const std::string candidate = (line.empty() ? "" : line + " | ") + gpu_text(snap.gpus[next]);
      const std::size_t need = candidate.size() + (last && next + 1 < n ? more(n - next - 1).size() : 0);
      if (!line.empty() && need > max) break;
      line = candidate;
      ++next;
    }
    if (last && next < n) line += more(n - next);
    plain.push_back(cut(std::move(line), max));
  }

  if (!color) return plain;
  std::vector<std::string> out;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    if (i == 0 && snap.failed > 0) {
      // Failures in red: the eye goes there first.
      const std::string word = std::to_string(snap.failed) + " failed";
      const std::size_t at = plain[0].find(word);
      if (at != std::string::npos) {
        out.push_back(k_dim + plain[0].substr(0, at) + k_reset + k_red + word + k_reset + k_dim +
                      plain[0].substr(at + word.size()) + k_reset);
        continue;
      }
    }
    out.push_back(k_dim + plain[i] + k_reset);
  }
  return out;
}

std::string erase_text(std::size_t lines) {
  if (lines == 0) return {};
  std::string out = "\r\x1b[2K";
  for (std::size_t i = 1; i < lines; ++i) out += "\x1b[1A\x1b[2K";
  return out;
}

std::string draw_text(const std::vector<std::string>& lines) {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    out += lines[i];
  }
  return out;
}

} // namespace air
