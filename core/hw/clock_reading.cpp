#include "core/hw/clock_reading.hpp"

#include "core/hw/health_reading.hpp"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace air {

std::vector<std::string> clocks_event_names(std::uint64_t reasons) {
  namespace ce = clocks_event;
  static constexpr std::array<std::pair<std::uint64_t, const char*>, 9> kNames = {{
      {ce::kGpuIdle, "idle"},
      {ce::kApplicationsClocksSetting, "app_clocks"},
      {ce::kSwPowerCap, "sw_power_cap"},
      {ce::kHwSlowdown, "hw_slowdown"},
      {ce::kSyncBoost, "sync_boost"},
      {ce::kSwThermalSlowdown, "sw_thermal_slowdown"},
      {ce::kHwThermalSlowdown, "hw_thermal_slowdown"},
      {ce::kHwPowerBrakeSlowdown, "hw_power_brake"},
      {ce::kDisplayClockSetting, "display_clocks"},
  }};
  std::vector<std::string> names;
  std::uint64_t known = 0;
  for (const auto& [bit, name] : kNames) {
    known |= bit;
    if ((reasons & bit) != 0) names.emplace_back(name);
  }
  for (int bit = 0; bit < 64; ++bit) {
    const std::uint64_t mask = std::uint64_t{1} << bit;
    if ((reasons & mask) != 0 && (known & mask) == 0) names.push_back(fmt::format("{:#x}", mask));
  }
  return names;
}

std::string describe_gpu_clocks(const std::string& uuid, const GpuClockReading& reading) {
  namespace ce = clocks_event;
  std::vector<std::string> parts;
  if (reading.sm_clock_mhz) {
    parts.push_back(reading.sm_clock_max_mhz
                        ? fmt::format("SM {} of {} MHz", *reading.sm_clock_mhz, *reading.sm_clock_max_mhz)
                        : fmt::format("SM {} MHz", *reading.sm_clock_mhz));
  }
  // Only the reasons that slow a busy GPU: idle and the clock settings are states.
  constexpr std::uint64_t kNormal =
      ce::kGpuIdle | ce::kApplicationsClocksSetting | ce::kSyncBoost | ce::kDisplayClockSetting;
  if (reading.clocks_event_reasons && (*reading.clocks_event_reasons & ~kNormal) != 0) {
    std::string names;
    for (const auto& name : clocks_event_names(*reading.clocks_event_reasons & ~kNormal))
      names += (names.empty() ? "" : ", ") + name;
    parts.push_back("held down by " + names);
  }
  if (reading.temperature_c) parts.push_back(fmt::format("{} C", *reading.temperature_c));
  if (reading.power_mw) {
    parts.push_back(reading.power_limit_mw
                        ? fmt::format("{} of {} W", *reading.power_mw / 1000, *reading.power_limit_mw / 1000)
                        : fmt::format("{} W", *reading.power_mw / 1000));
  }
  if (parts.empty()) return {};
  std::string text = uuid + ":";
  for (std::size_t i = 0; i < parts.size(); ++i) text += (i == 0 ? " " : ", ") + parts[i];
  return text;
}

} // namespace air
