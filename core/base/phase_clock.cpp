#include "core/base/phase_clock.hpp"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace air::phases {
namespace {

using Clock = std::chrono::steady_clock;

struct Mark {
  const char* name;
  Clock::time_point at;
};

// A fixed table: a mark allocates nothing, so it may stand in the spawn's
// hot path without changing what it measures.
constexpr std::size_t k_max_marks = 64;
bool g_enabled = false;
Clock::time_point g_origin;
std::array<Mark, k_max_marks> g_marks;
std::size_t g_count = 0;

} // namespace

void start_from_environment() {
  const char* value = std::getenv("AIR_RUN_PHASES");
  g_enabled = value != nullptr && std::strcmp(value, "1") == 0;
  g_origin = Clock::now();
  g_count = 0;
}

bool enabled() { return g_enabled; }

void mark(const char* name) {
  if (!g_enabled || g_count == k_max_marks) return;
  g_marks[g_count++] = Mark{name, Clock::now()};
}

std::string report() {
  if (!g_enabled) return "";
  std::string line = "air-run: phases (ms):";
  Clock::time_point before = g_origin;
  for (std::size_t i = 0; i < g_count; ++i) {
    const double ms = std::chrono::duration<double, std::milli>(g_marks[i].at - before).count();
    line += fmt::format("{} {} {:.3f}", i == 0 ? "" : ",", g_marks[i].name, ms);
    before = g_marks[i].at;
  }
  return line + "\n";
}

} // namespace air::phases
