#pragma once

#include "core/base/error.hpp"
#include "core/hw/clock_reading.hpp"
#include "core/hw/hardware.hpp"
#include "core/hw/health_reading.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace air {

/// The part of the NVML C API that air-run calls, declared here instead of
/// including nvml.h: the build must not need the CUDA toolkit or a driver, and
/// the library is only ever loaded with dlopen. Types and values follow nvml.h.
namespace nvml {

using Return = int;                                 ///< nvmlReturn_t, a C enum (int-sized on every Linux ABI)
inline constexpr Return kSuccess = 0;               ///< NVML_SUCCESS
inline constexpr Return kErrorInsufficientSize = 7; ///< NVML_ERROR_INSUFFICIENT_SIZE
inline constexpr Return kErrorDriverNotLoaded = 9;  ///< NVML_ERROR_DRIVER_NOT_LOADED
inline constexpr Return kErrorNotSupported = 3;     ///< NVML_ERROR_NOT_SUPPORTED
inline constexpr Return kErrorGpuIsLost = 15;       ///< NVML_ERROR_GPU_IS_LOST
inline constexpr Return kErrorResetRequired = 16;   ///< NVML_ERROR_RESET_REQUIRED

struct DeviceSt;          ///< struct nvmlDevice_st, opaque
using Device = DeviceSt*; ///< nvmlDevice_t

/// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v2 and _v3.
struct PciInfo {
  char bus_id_legacy[16]; ///< busIdLegacy, "0000:18:00.0" (4-digit domain)
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;    ///< pciDeviceId
  unsigned int pci_subsystem_id; ///< pciSubSystemId
  char bus_id[32];               ///< busId, "00000000:18:00.0" (8-digit domain): what air-run
                                 ///< reports
};

static_assert(sizeof(PciInfo) == 68, "nvmlPciInfo_t is 16 + 5 * 4 + 32 bytes");

/// nvmlMemory_t (the v1 struct, filled by nvmlDeviceGetMemoryInfo): bytes.
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

static_assert(sizeof(Memory) == 24, "nvmlMemory_t is three unsigned long long");

/// nvmlProcessInfo_t as filled by nvmlDeviceGetComputeRunningProcesses_v3
/// and _v2 (nvmlProcessInfo_v2_t; the _v1 call fills a shorter struct and is
/// never used). 4 bytes of padding follow `pid` on every 64-bit ABI.
struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_gpu_memory; ///< usedGpuMemory; kValueNotAvailable when hidden
  unsigned int gpu_instance_id;       ///< gpuInstanceId (MIG), 0xFFFFFFFF otherwise
  unsigned int compute_instance_id;   ///< computeInstanceId (MIG)
};

static_assert(sizeof(ProcessInfo) == 24, "nvmlProcessInfo_v2_t is 4 + 4 (pad) + 8 + 4 + 4 bytes");
static_assert(offsetof(ProcessInfo, used_gpu_memory) == 8, "usedGpuMemory is 8-byte aligned");

inline constexpr unsigned long long kValueNotAvailable = ~0ULL; ///< NVML_VALUE_NOT_AVAILABLE

// Enum values passed by value (C enums, int-sized), as in nvml.h.
inline constexpr int kMemoryErrorCorrected = 0;   ///< NVML_MEMORY_ERROR_TYPE_CORRECTED
inline constexpr int kMemoryErrorUncorrected = 1; ///< NVML_MEMORY_ERROR_TYPE_UNCORRECTED
inline constexpr int kVolatileEcc = 0;            ///< NVML_VOLATILE_ECC
inline constexpr int kAggregateEcc = 1;           ///< NVML_AGGREGATE_ECC
inline constexpr int kRetiredMultipleSingleBit =
    0;                                       ///< NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
inline constexpr int kRetiredDoubleBit = 1;  ///< NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
inline constexpr int kTemperatureGpu = 0;    ///< NVML_TEMPERATURE_GPU
inline constexpr int kThresholdShutdown = 0; ///< NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
inline constexpr int kThresholdSlowdown = 1; ///< NVML_TEMPERATURE_THRESHOLD_SLOWDOWN

/// The entry points the preflight health check uses, looked up with dlsym
/// one by one. Each may be null: an old driver or a GPU family without the
/// feature reads as "not supported", never as a failure.
struct HealthApi {
  Return (*device_get_handle_by_uuid)(const char*, Device*) = nullptr; ///< nvmlDeviceGetHandleByUUID
  Return (*device_get_total_ecc_errors)(Device, int, int,
                                        unsigned long long*) = nullptr; ///< nvmlDeviceGetTotalEccErrors
  Return (*device_get_retired_pages)(Device, int, unsigned int*, unsigned long long*,
                                     unsigned long long*) = nullptr;         ///< nvmlDeviceGetRetiredPages_v2
  Return (*device_get_retired_pages_pending_status)(Device, int*) = nullptr; ///< ...PendingStatus
  Return (*device_get_remapped_rows)(Device, unsigned int*, unsigned int*, unsigned int*,
                                     unsigned int*) = nullptr;            ///< nvmlDeviceGetRemappedRows
  Return (*device_get_temperature)(Device, int, unsigned int*) = nullptr; ///< nvmlDeviceGetTemperature
  Return (*device_get_temperature_threshold)(Device, int,
                                             unsigned int*) = nullptr; ///< ...TemperatureThreshold
  /// nvmlDeviceGetCurrentClocksEventReasons, else the older ...ClocksThrottleReasons (same bits).
  Return (*device_get_clocks_event_reasons)(Device, unsigned long long*) = nullptr;
  /// nvmlDeviceGetComputeRunningProcesses_v3, else _v2 (same struct).
  Return (*device_get_compute_running_processes)(Device, unsigned int*, ProcessInfo*) = nullptr;
};

inline constexpr unsigned int kNameBufferSize = 96; ///< NVML_DEVICE_NAME_V2_BUFFER_SIZE
inline constexpr unsigned int kUuidBufferSize = 96; ///< NVML_DEVICE_UUID_V2_BUFFER_SIZE

/// The resolved entry points. Every pointer is non-null once a library is open.
struct Api {
  Return (*init_v2)() = nullptr;                          ///< nvmlInit_v2
  Return (*shutdown)() = nullptr;                         ///< nvmlShutdown
  Return (*device_get_count_v2)(unsigned int*) = nullptr; ///< nvmlDeviceGetCount_v2
  Return (*device_get_handle_by_index_v2)(unsigned int,
                                          Device*) = nullptr; ///< ..._v2
  Return (*device_get_name)(Device, char*,
                            unsigned int) = nullptr; ///< nvmlDeviceGetName
  Return (*device_get_uuid)(Device, char*,
                            unsigned int) = nullptr;           ///< nvmlDeviceGetUUID
  Return (*device_get_pci_info)(Device, PciInfo*) = nullptr;   ///< nvmlDeviceGetPciInfo_v3, else _v2
  Return (*device_get_memory_info)(Device, Memory*) = nullptr; ///< nvmlDeviceGetMemoryInfo
  const char* (*error_string)(Return) = nullptr;               ///< nvmlErrorString
};

/// A C string from a fixed buffer that NVML should have terminated; never
/// reads past the buffer if it did not.
std::string text(const char* buffer, std::size_t size);

} // namespace nvml

/// NVML, loaded with dlopen, its symbols resolved and nvmlInit_v2 done; the
/// destructor calls nvmlShutdown and dlclose. Move-only. Detection uses it for
/// one scan; a later preflight health check can open its own (NVML counts
/// init/shutdown pairs and dlopen counts references, so two may coexist) and
/// look up further symbols with `symbol`.
class NvmlLibrary {
public:
  static constexpr const char* kDefaultPath = "libnvidia-ml.so.1";

  /// Opens `path` (a soname searched the usual dlopen way, or a file path).
  /// Errors (kind system) read as detection reasons: "NVML not available:
  /// <dlerror>" when the library or one of its symbols is missing, "NVML init
  /// failed: <nvmlErrorString>" when no usable driver answers.
  static Expected<NvmlLibrary> open(const char* path = kDefaultPath);

  NvmlLibrary(NvmlLibrary&& other) noexcept;
  NvmlLibrary& operator=(NvmlLibrary&& other) noexcept;
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  ~NvmlLibrary();

  /// The resolved entry points (all non-null).
  const nvml::Api& api() const { return api_; }

  /// Looks up another NVML symbol by name; nullptr when this driver lacks it.
  void* symbol(const char* name) const;

  /// nvmlErrorString for `code`, with the number when NVML has no text.
  std::string error_string(nvml::Return code) const;

  /// nvmlDeviceGetCount_v2. Error text: "NVML device count failed: <reason>".
  Expected<unsigned int> device_count() const;

  /// Name, UUID, PCI bus id and memory of device `index` (NVML's index order).
  /// Only a missing handle or UUID is an error: without a UUID a rank cannot
  /// be bound. A failed memory query gives 0 bytes.
  Expected<GpuInfo> device_info(unsigned int index) const;

  /// Resolves the optional health entry points (null where the driver lacks one).
  nvml::HealthApi health_api() const;

  /// Reads the preflight health values of the GPU with `uuid` (see
  /// core/hw/nvml_health.cpp). A query the GPU does not support leaves its probe
  /// empty with why "not supported"; a lost GPU sets `lost`. Error (system
  /// kind) only when no device has that UUID: "NVML has no GPU <uuid>".
  Expected<GpuHealthReading> read_health(const std::string& uuid) const;

  /// Reads what the console's live status area shows of the GPU with `uuid`
  /// (core/hw/nvml_live.cpp): utilisation, memory used/total, temperature.
  /// A query the GPU does not answer leaves its field empty. Error (system
  /// kind) only when no device has that UUID.
  Expected<GpuLiveReading> read_live(const std::string& uuid) const;
  /// The clocks, clock event reasons, temperature and power of the GPU
  /// with `uuid`, for naming what slows a straggler. Errors: system (no such GPU).
  Expected<GpuClockReading> read_clock_reading(const std::string& uuid) const;

private:
  NvmlLibrary(void* handle, const nvml::Api& api) : handle_(handle), api_(api) {}
  void close() noexcept;

  void* handle_ = nullptr; ///< from dlopen; nullptr once moved from
  nvml::Api api_;
};

/// What one NVML scan found: devices in NVML index order, plus one note per
/// device that could not be read (and was skipped).
struct NvmlScan {
  std::vector<GpuInfo> gpus;
  std::vector<std::string> notes;
};

/// Opens NVML, reads every device, and closes it again before returning, so
/// no driver file descriptor is held while ranks are spawned. Errors are
/// `NvmlLibrary::open`'s or `device_count`'s.
Expected<NvmlScan> scan_nvml_gpus(const char* path = NvmlLibrary::kDefaultPath);

} // namespace air
