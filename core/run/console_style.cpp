#include "core/run/console_style.hpp"

#include <cstdio>
#include <ctime>

namespace air {

bool use_color(bool is_tty, const Environment& env) {
  if (!env_or(env, "NO_COLOR").empty()) return false;
  const std::string force = env_or(env, "FORCE_COLOR");
  if (!force.empty() && force != "0") return true;
  return is_tty && env_or(env, "TERM") != "dumb";
}

std::string paint(std::string_view text, Paint how, bool color) {
  if (!color || text.empty()) return std::string(text);
  const bool newline = text.back() == '\n';
  if (newline) text.remove_suffix(1);
  std::string out = how == Paint::dim ? "\x1b[2m" : "\x1b[31m";
  out += text;
  out += "\x1b[0m";
  if (newline) out += '\n';
  return out;
}

std::string clock_stamp(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03d ", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms));
  return buf;
}

std::string rank_prefix(int rank, bool color) {
  const std::string plain = "[rank" + std::to_string(rank) + "]:";
  if (!color) return plain + " ";
  // Cyan, green, yellow, blue, magenta, red's bright twin: red itself is
  // kept for errors.
  static constexpr int k_colors[] = {36, 32, 33, 34, 35, 91};
  const int code = k_colors[static_cast<unsigned>(rank) % (sizeof(k_colors) / sizeof(k_colors[0]))];
  return "\x1b[" + std::to_string(code) + "m" + plain + "\x1b[0m ";
}

} // namespace air
