// Live GPU readings for the console's status area: a few cheap NVML queries,
// taken at most once a second while ranks run (core/run/live_view.cpp).
#include "core/hw/nvml.hpp"

#include <fmt/format.h>

#include <cstring>

namespace air {

namespace {

/// nvmlUtilization_t: percentages over the driver's last sample period.
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};

using GetUtilization = nvml::Return (*)(nvml::Device, Utilization*);
using GetClock = nvml::Return (*)(nvml::Device, int, unsigned int*); ///< nvmlDeviceGet(Max)ClockInfo
using GetMilliwatts = nvml::Return (*)(nvml::Device, unsigned int*); ///< power usage and limit, mW
constexpr int kClockSm = 1;                                          ///< NVML_CLOCK_SM

/// The device with `uuid`, through the UUID lookup or, on drivers without
/// it, by comparing every device's UUID.
bool find_device(const NvmlLibrary& lib, const nvml::HealthApi& health, const std::string& uuid,
                 nvml::Device& device) {
  if (health.device_get_handle_by_uuid != nullptr &&
      health.device_get_handle_by_uuid(uuid.c_str(), &device) == nvml::kSuccess)
    return true;
  auto count = lib.device_count();
  if (!count) return false;
  for (unsigned int i = 0; i < *count; ++i) {
    char text[nvml::kUuidBufferSize] = {};
    if (lib.api().device_get_handle_by_index_v2(i, &device) != nvml::kSuccess) continue;
    if (lib.api().device_get_uuid(device, text, sizeof text) != nvml::kSuccess) continue;
    if (std::strncmp(text, uuid.c_str(), sizeof text) == 0) return true;
  }
  return false;
}

} // namespace

Expected<GpuLiveReading> NvmlLibrary::read_live(const std::string& uuid) const {
  const nvml::HealthApi health = health_api();
  nvml::Device device = nullptr;
  if (!find_device(*this, health, uuid, device))
    return Error{ErrorKind::system, fmt::format("NVML has no GPU {}", uuid)};
  GpuLiveReading reading;
  if (const auto get = reinterpret_cast<GetUtilization>(symbol("nvmlDeviceGetUtilizationRates"))) {
    Utilization u{};
    if (get(device, &u) == nvml::kSuccess) reading.utilization_pct = u.gpu;
  }
  nvml::Memory memory{};
  if (api_.device_get_memory_info(device, &memory) == nvml::kSuccess) {
    reading.memory_used_bytes = memory.used;
    reading.memory_total_bytes = memory.total;
  }
  unsigned int temperature = 0;
  if (health.device_get_temperature != nullptr &&
      health.device_get_temperature(device, nvml::kTemperatureGpu, &temperature) == nvml::kSuccess)
    reading.temperature_c = temperature;
  return reading;
}

Expected<GpuClockReading> NvmlLibrary::read_clock_reading(const std::string& uuid) const {
  const nvml::HealthApi health = health_api();
  nvml::Device device = nullptr;
  if (!find_device(*this, health, uuid, device))
    return Error{ErrorKind::system, fmt::format("NVML has no GPU {}", uuid)};
  GpuClockReading reading;
  const auto ask = [&](const char* name, auto call) {
    if (void* fn = symbol(name)) call(fn);
  };
  unsigned int value = 0;
  ask("nvmlDeviceGetClockInfo", [&](void* fn) {
    if (reinterpret_cast<GetClock>(fn)(device, kClockSm, &value) == nvml::kSuccess)
      reading.sm_clock_mhz = value;
  });
  ask("nvmlDeviceGetMaxClockInfo", [&](void* fn) {
    if (reinterpret_cast<GetClock>(fn)(device, kClockSm, &value) == nvml::kSuccess)
      reading.sm_clock_max_mhz = value;
  });
  ask("nvmlDeviceGetPowerUsage", [&](void* fn) {
    if (reinterpret_cast<GetMilliwatts>(fn)(device, &value) == nvml::kSuccess) reading.power_mw = value;
  });
  ask("nvmlDeviceGetEnforcedPowerLimit", [&](void* fn) {
    if (reinterpret_cast<GetMilliwatts>(fn)(device, &value) == nvml::kSuccess) reading.power_limit_mw = value;
  });
  unsigned long long reasons = 0;
  if (health.device_get_clocks_event_reasons != nullptr &&
      health.device_get_clocks_event_reasons(device, &reasons) == nvml::kSuccess)
    reading.clocks_event_reasons = reasons;
  if (health.device_get_temperature != nullptr &&
      health.device_get_temperature(device, nvml::kTemperatureGpu, &value) == nvml::kSuccess)
    reading.temperature_c = value;
  return reading;
}

} // namespace air
