// The NVML side of the preflight health check: optional entry points looked
// up one by one, and one reading per GPU. Judging the values is health.cpp's job.
#include "core/hw/nvml.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cstring>
#include <vector>

namespace air {

namespace {

/// Casts dlsym's void* to the slot's function pointer type (what POSIX
/// guarantees to work); leaves the slot null when the symbol is missing.
template <typename Fn> void lookup(const NvmlLibrary& library, const char* name, Fn& slot) {
  if (slot != nullptr) return; // an earlier, preferred name was found
  if (void* address = library.symbol(name)) slot = reinterpret_cast<Fn>(address);
}

/// Reads one query's return code into a probe's `why`, and a lost GPU into
/// the reading. True on success.
class Outcome {
public:
  Outcome(const NvmlLibrary& library, GpuHealthReading& reading) : library_(library), reading_(reading) {}

  template <typename T> bool ok(nvml::Return rc, Probe<T>& probe) {
    if (rc == nvml::kSuccess) return true;
    probe.value.reset();
    if (rc == nvml::kErrorNotSupported) {
      probe.why = "not supported";
    } else {
      probe.why = "NVML: " + library_.error_string(rc);
    }
    if ((rc == nvml::kErrorGpuIsLost || rc == nvml::kErrorResetRequired) && !reading_.lost) {
      reading_.lost = true;
      reading_.lost_why = library_.error_string(rc);
    }
    return false;
  }

  template <typename T> static bool missing(const void* fn, Probe<T>& probe) {
    if (fn != nullptr) return false;
    probe.why = "not supported by this driver";
    return true;
  }

private:
  const NvmlLibrary& library_;
  GpuHealthReading& reading_;
};

void read_ecc(const nvml::HealthApi& api, nvml::Device device, Outcome& outcome, GpuHealthReading& r) {
  auto* fn = api.device_get_total_ecc_errors;
  if (Outcome::missing(reinterpret_cast<const void*>(fn), r.ecc_uncorrected_volatile)) {
    r.ecc_uncorrected_aggregate.why = r.ecc_corrected_volatile.why = r.ecc_uncorrected_volatile.why;
    return;
  }
  // NOT_SUPPORTED here means ECC is off or absent (GeForce, ECC disabled).
  unsigned long long count = 0;
  if (outcome.ok(fn(device, nvml::kMemoryErrorUncorrected, nvml::kVolatileEcc, &count),
                 r.ecc_uncorrected_volatile)) {
    r.ecc_uncorrected_volatile.value = count;
  }
  count = 0;
  if (outcome.ok(fn(device, nvml::kMemoryErrorUncorrected, nvml::kAggregateEcc, &count),
                 r.ecc_uncorrected_aggregate)) {
    r.ecc_uncorrected_aggregate.value = count;
  }
  count = 0;
  if (outcome.ok(fn(device, nvml::kMemoryErrorCorrected, nvml::kVolatileEcc, &count),
                 r.ecc_corrected_volatile)) {
    r.ecc_corrected_volatile.value = count;
  }
}

void read_retired_pages(const nvml::HealthApi& api, nvml::Device device, Outcome& outcome,
                        GpuHealthReading& r) {
  auto* pages = api.device_get_retired_pages;
  auto* pending = api.device_get_retired_pages_pending_status;
  if (Outcome::missing(reinterpret_cast<const void*>(pages), r.retired_pages) ||
      Outcome::missing(reinterpret_cast<const void*>(pending), r.retired_pages)) {
    return;
  }
  RetiredPages value;
  // A count of 0 asks for the size only: NVML answers with the number of
  // pages, as SUCCESS (none) or INSUFFICIENT_SIZE (some); no address buffer.
  for (const int cause : {nvml::kRetiredMultipleSingleBit, nvml::kRetiredDoubleBit}) {
    unsigned int count = 0;
    const nvml::Return rc = pages(device, cause, &count, nullptr, nullptr);
    if (rc != nvml::kErrorInsufficientSize && !outcome.ok(rc, r.retired_pages)) return;
    (cause == nvml::kRetiredDoubleBit ? value.double_bit : value.single_bit) = count;
  }
  int state = 0; // nvmlEnableState_t
  if (!outcome.ok(pending(device, &state), r.retired_pages)) return;
  value.pending = state != 0;
  r.retired_pages.value = value;
}

void read_remapped_rows(const nvml::HealthApi& api, nvml::Device device, Outcome& outcome,
                        GpuHealthReading& r) {
  auto* fn = api.device_get_remapped_rows;
  if (Outcome::missing(reinterpret_cast<const void*>(fn), r.remapped_rows)) return;
  unsigned int correctable = 0, uncorrectable = 0, pending = 0, failure = 0;
  if (!outcome.ok(fn(device, &correctable, &uncorrectable, &pending, &failure), r.remapped_rows)) return;
  r.remapped_rows.value = RemappedRows{correctable, uncorrectable, pending != 0, failure != 0};
}

void read_temperature(const nvml::HealthApi& api, nvml::Device device, Outcome& outcome,
                      GpuHealthReading& r) {
  auto* fn = api.device_get_temperature;
  if (Outcome::missing(reinterpret_cast<const void*>(fn), r.temperature)) return;
  Temperature value;
  if (!outcome.ok(fn(device, nvml::kTemperatureGpu, &value.current_c), r.temperature)) return;
  if (auto* threshold = api.device_get_temperature_threshold) {
    // A missing threshold only weakens the check; it is not an error.
    unsigned int degrees = 0;
    if (threshold(device, nvml::kThresholdSlowdown, &degrees) == nvml::kSuccess) value.slowdown_c = degrees;
    if (threshold(device, nvml::kThresholdShutdown, &degrees) == nvml::kSuccess) value.shutdown_c = degrees;
  }
  r.temperature.value = value;
}

void read_clocks(const nvml::HealthApi& api, nvml::Device device, Outcome& outcome, GpuHealthReading& r) {
  auto* fn = api.device_get_clocks_event_reasons;
  if (Outcome::missing(reinterpret_cast<const void*>(fn), r.clocks_event_reasons)) return;
  unsigned long long reasons = 0;
  if (outcome.ok(fn(device, &reasons), r.clocks_event_reasons)) r.clocks_event_reasons.value = reasons;
}

void read_processes(const nvml::HealthApi& api, nvml::Device device, Outcome& outcome, GpuHealthReading& r) {
  auto* fn = api.device_get_compute_running_processes;
  if (Outcome::missing(reinterpret_cast<const void*>(fn), r.other_processes)) return;
  // The size dance: ask with no buffer; INSUFFICIENT_SIZE gives the count.
  // Processes can start between two calls, so allocate with room to spare
  // and retry a few times if the list still grew.
  std::vector<nvml::ProcessInfo> infos;
  unsigned int count = 0;
  nvml::Return rc = fn(device, &count, nullptr);
  for (int attempt = 0; rc == nvml::kErrorInsufficientSize && attempt < 4; ++attempt) {
    infos.assign(static_cast<std::size_t>(count) * 2 + 8, nvml::ProcessInfo{});
    count = static_cast<unsigned int>(infos.size());
    rc = fn(device, &count, infos.data());
  }
  if (!outcome.ok(rc, r.other_processes)) return;
  if (count > infos.size())
    count = static_cast<unsigned int>(infos.size()); // SUCCESS with no buffer: count is 0
  OtherProcesses value;
  const auto self = static_cast<unsigned int>(::getpid());
  for (unsigned int i = 0; i < count; ++i) {
    const nvml::ProcessInfo& info = infos[i];
    if (info.pid == self) continue;
    ++value.count;
    if (info.used_gpu_memory == nvml::kValueNotAvailable) {
      ++value.unknown_usage;
    } else {
      value.used_bytes += info.used_gpu_memory;
    }
  }
  r.other_processes.value = value;
}

} // namespace

nvml::HealthApi NvmlLibrary::health_api() const {
  nvml::HealthApi api;
  lookup(*this, "nvmlDeviceGetHandleByUUID", api.device_get_handle_by_uuid);
  lookup(*this, "nvmlDeviceGetTotalEccErrors", api.device_get_total_ecc_errors);
  lookup(*this, "nvmlDeviceGetRetiredPages_v2", api.device_get_retired_pages);
  lookup(*this, "nvmlDeviceGetRetiredPagesPendingStatus", api.device_get_retired_pages_pending_status);
  lookup(*this, "nvmlDeviceGetRemappedRows", api.device_get_remapped_rows);
  lookup(*this, "nvmlDeviceGetTemperature", api.device_get_temperature);
  lookup(*this, "nvmlDeviceGetTemperatureThreshold", api.device_get_temperature_threshold);
  // The reasons were renamed from "throttle" to "clocks event" in R535; the
  // old name stays exported with the same bits.
  lookup(*this, "nvmlDeviceGetCurrentClocksEventReasons", api.device_get_clocks_event_reasons);
  lookup(*this, "nvmlDeviceGetCurrentClocksThrottleReasons", api.device_get_clocks_event_reasons);
  lookup(*this, "nvmlDeviceGetComputeRunningProcesses_v3", api.device_get_compute_running_processes);
  lookup(*this, "nvmlDeviceGetComputeRunningProcesses_v2", api.device_get_compute_running_processes);
  return api;
}

Expected<GpuHealthReading> NvmlLibrary::read_health(const std::string& uuid) const {
  const nvml::HealthApi api = health_api();
  nvml::Device device = nullptr;
  bool found = false;
  if (api.device_get_handle_by_uuid != nullptr) {
    found = api.device_get_handle_by_uuid(uuid.c_str(), &device) == nvml::kSuccess;
  }
  if (!found) {
    // Older drivers, or a UUID form the lookup rejects: compare one by one.
    auto count = device_count();
    if (!count) return count.error();
    for (unsigned int i = 0; i < *count && !found; ++i) {
      char text[nvml::kUuidBufferSize] = {};
      if (api_.device_get_handle_by_index_v2(i, &device) != nvml::kSuccess) continue;
      found = api_.device_get_uuid(device, text, sizeof text) == nvml::kSuccess &&
              nvml::text(text, sizeof text) == uuid;
    }
  }
  if (!found) return Error{ErrorKind::system, fmt::format("NVML has no GPU {}", uuid)};

  GpuHealthReading reading;
  reading.uuid = uuid;
  char name[nvml::kNameBufferSize] = {};
  reading.name = api_.device_get_name(device, name, sizeof name) == nvml::kSuccess
                     ? nvml::text(name, sizeof name)
                     : std::string("unknown");
  Outcome outcome(*this, reading);
  read_ecc(api, device, outcome, reading);
  read_retired_pages(api, device, outcome, reading);
  read_remapped_rows(api, device, outcome, reading);
  read_temperature(api, device, outcome, reading);
  read_clocks(api, device, outcome, reading);
  read_processes(api, device, outcome, reading);
  nvml::Memory memory{};
  if (outcome.ok(api_.device_get_memory_info(device, &memory), reading.memory)) {
    reading.memory.value = MemoryUsage{memory.total, memory.used};
  }
  return reading;
}

} // namespace air
