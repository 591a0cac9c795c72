#include "core/run/console_style.hpp"

namespace air {

bool use_color(bool is_tty, const Environment& env) {
  if (!env_or(env, "NO_COLOR").empty()) return false;
  const std::string force = env_or(env, "FORCE_COLOR");
  if (!force.empty() && force != "0") return true;
  return is_tty && env_or(env, "TERM") != "dumb";
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
