// Preflight: health evaluation with fake NVML readings, air-nccl-check's JSON,
// the bandwidth verdict, and (hidden, [.gpu]) the real NVML health path.
#include "core/hw/nvml.hpp"
#include "core/preflight/health.hpp"
#include "core/preflight/nccl_check.hpp"
#include "tests/unit/catch.hpp"

#include <string>

using air::CheckResult;
using air::CheckStatus;
using air::GpuHealthReading;

namespace {

/// A healthy Hopper-like GPU: ECC on and clean, row remapping instead of page
/// retirement, cool, idle, nobody else on it.
GpuHealthReading healthy() {
  GpuHealthReading r;
  r.uuid = "GPU-1";
  r.name = "NVIDIA H200";
  r.ecc_uncorrected_volatile.value = 0;
  r.ecc_uncorrected_aggregate.value = 0;
  r.ecc_corrected_volatile.value = 3;
  r.retired_pages.why = "not supported";
  r.remapped_rows.value = air::RemappedRows{};
  r.temperature.value = air::Temperature{34, 87, 92};
  r.clocks_event_reasons.value = air::clocks_event::kGpuIdle;
  r.other_processes.value = air::OtherProcesses{};
  r.memory.value = air::MemoryUsage{150ULL << 30, 512ULL << 20};
  return r;
}

const CheckResult& find(const std::vector<CheckResult>& checks, const std::string& name) {
  for (const auto& c : checks) {
    if (c.name == name) return c;
  }
  FAIL("no check named " << name);
  return checks.front();
}

CheckResult only(const GpuHealthReading& r, const std::string& name) {
  return find(air::evaluate_gpu_health(r), name);
}

} // namespace

TEST_CASE("a healthy GPU passes every check it can measure", "[health]") {
  const auto checks = air::evaluate_gpu_health(healthy());
  REQUIRE(checks.size() == 6);
  CHECK(checks[0].name == "ecc");
  CHECK(checks[0].status == CheckStatus::pass);
  CHECK(checks[0].detail == "uncorrected 0 since driver load, 0 lifetime; corrected 3");
  CHECK(checks[1].name == "retired_pages");
  CHECK(checks[1].status == CheckStatus::skip);
  CHECK(checks[1].detail == "not supported");
  CHECK(checks[2].name == "row_remap");
  CHECK(checks[2].status == CheckStatus::pass);
  CHECK(checks[2].detail == "0 rows remapped (0 correctable, 0 uncorrectable)");
  CHECK(checks[3].name == "temperature");
  CHECK(checks[3].status == CheckStatus::pass);
  CHECK(checks[3].detail == "34 C (slowdown at 87 C)");
  CHECK(checks[4].name == "clocks");
  CHECK(checks[4].status == CheckStatus::pass);
  CHECK(checks[4].detail == "idle");
  CHECK(checks[5].name == "other_processes");
  CHECK(checks[5].status == CheckStatus::pass);
  CHECK(checks[5].detail == "none; memory used 512 MiB of 150.0 GiB");
  CHECK(air::overall_status(checks) == CheckStatus::pass);
}

TEST_CASE("ECC: uncorrected since driver load fails, lifetime only warns", "[health]") {
  auto r = healthy();
  r.ecc_uncorrected_volatile.value = 1;
  r.ecc_uncorrected_aggregate.value = 1;
  CHECK(only(r, "ecc").status == CheckStatus::fail);
  CHECK(only(r, "ecc").detail == "uncorrected 1 since driver load, 1 lifetime; corrected 3");

  r.ecc_uncorrected_volatile.value = 0;
  r.ecc_uncorrected_aggregate.value = 4;
  CHECK(only(r, "ecc").status == CheckStatus::warn);

  // Many corrected errors alone are ECC doing its job.
  r.ecc_uncorrected_aggregate.value = 0;
  r.ecc_corrected_volatile.value = 100000;
  CHECK(only(r, "ecc").status == CheckStatus::pass);

  r.ecc_uncorrected_volatile = {std::nullopt, "not supported"};
  CHECK(only(r, "ecc").status == CheckStatus::skip);
  CHECK(only(r, "ecc").detail == "not supported");
}

TEST_CASE("retired pages: pending fails, DCGM's limits warn and fail", "[health]") {
  auto r = healthy();
  r.retired_pages.value = air::RetiredPages{2, 1, true};
  CHECK(only(r, "retired_pages").status == CheckStatus::fail);
  CHECK(only(r, "retired_pages").detail ==
        "3 retired (2 single-bit, 1 double-bit), retirement pending: reset the GPU");

  r.retired_pages.value = air::RetiredPages{14, 0, false};
  CHECK(only(r, "retired_pages").status == CheckStatus::pass);
  r.retired_pages.value = air::RetiredPages{14, 1, false};
  CHECK(only(r, "retired_pages").status == CheckStatus::warn);
  CHECK(only(r, "retired_pages").detail == "15 retired (14 single-bit, 1 double-bit) (warn at 15)");
  r.retired_pages.value = air::RetiredPages{59, 0, false};
  CHECK(only(r, "retired_pages").status == CheckStatus::warn);
  r.retired_pages.value = air::RetiredPages{30, 30, false};
  CHECK(only(r, "retired_pages").status == CheckStatus::fail);
  CHECK(only(r, "retired_pages").detail == "60 retired (30 single-bit, 30 double-bit) (limit 60)");
}

TEST_CASE("row remapping: a pending remap or a failed one fails", "[health]") {
  auto r = healthy();
  r.remapped_rows.value = air::RemappedRows{2, 1, false, false};
  CHECK(only(r, "row_remap").status == CheckStatus::pass);
  CHECK(only(r, "row_remap").detail == "3 rows remapped (2 correctable, 1 uncorrectable)");

  r.remapped_rows.value = air::RemappedRows{0, 1, true, false};
  CHECK(only(r, "row_remap").status == CheckStatus::fail);
  CHECK(only(r, "row_remap").detail ==
        "1 rows remapped (0 correctable, 1 uncorrectable), remap pending: reset the GPU");

  r.remapped_rows.value = air::RemappedRows{0, 0, false, true};
  CHECK(only(r, "row_remap").status == CheckStatus::fail);
  CHECK(only(r, "row_remap").detail ==
        "0 rows remapped (0 correctable, 0 uncorrectable), remap failed: the GPU needs service");
}

TEST_CASE("temperature: within 5 C of slowdown warns, at it fails", "[health]") {
  auto r = healthy();
  r.temperature.value = air::Temperature{81, 87, std::nullopt};
  CHECK(only(r, "temperature").status == CheckStatus::pass);
  r.temperature.value = air::Temperature{82, 87, std::nullopt};
  CHECK(only(r, "temperature").status == CheckStatus::warn);
  CHECK(only(r, "temperature").detail == "82 C (slowdown at 87 C), within 5 C");
  r.temperature.value = air::Temperature{87, 87, std::nullopt};
  CHECK(only(r, "temperature").status == CheckStatus::fail);
  CHECK(only(r, "temperature").detail == "87 C (slowdown at 87 C)");
  r.temperature.value = air::Temperature{95, std::nullopt, std::nullopt};
  CHECK(only(r, "temperature").status == CheckStatus::pass);
  CHECK(only(r, "temperature").detail == "95 C (no slowdown threshold reported)");

  air::HealthThresholds strict;
  strict.temperature_margin_c = 10;
  r.temperature.value = air::Temperature{78, 87, std::nullopt};
  CHECK(find(air::evaluate_gpu_health(r, strict), "temperature").status == CheckStatus::warn);
}

TEST_CASE("clock event reasons: hardware slowdowns fail, power cap warns, idle is fine", "[health]") {
  namespace ce = air::clocks_event;
  auto r = healthy();
  auto status_of = [&](std::uint64_t bits) {
    r.clocks_event_reasons.value = bits;
    return only(r, "clocks").status;
  };
  CHECK(status_of(0) == CheckStatus::pass);
  CHECK(status_of(ce::kGpuIdle | ce::kApplicationsClocksSetting | ce::kSyncBoost |
                  ce::kDisplayClockSetting) == CheckStatus::pass);
  CHECK(status_of(ce::kSwPowerCap) == CheckStatus::warn);
  CHECK(status_of(ce::kHwSlowdown) == CheckStatus::fail);
  CHECK(status_of(ce::kHwThermalSlowdown | ce::kHwSlowdown) == CheckStatus::fail);
  CHECK(status_of(ce::kHwPowerBrakeSlowdown) == CheckStatus::fail);
  CHECK(status_of(ce::kSwThermalSlowdown) == CheckStatus::fail);
  CHECK(status_of(ce::kSwPowerCap | ce::kHwSlowdown) == CheckStatus::fail);
  CHECK(status_of(0x200) == CheckStatus::pass); // a bit this build does not know

  r.clocks_event_reasons.value = 0;
  CHECK(only(r, "clocks").detail == "no clock event reason");
  r.clocks_event_reasons.value = ce::kSwPowerCap | ce::kHwSlowdown | 0x400;
  CHECK(only(r, "clocks").detail == "sw_power_cap, hw_slowdown, 0x400");
  CHECK(air::clocks_event_names(0x1FF) ==
        std::vector<std::string>{"idle", "app_clocks", "sw_power_cap", "hw_slowdown", "sync_boost",
                                 "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake",
                                 "display_clocks"});
}

TEST_CASE("other processes: more than 1 GiB, or hidden usage, warns", "[health]") {
  auto r = healthy();
  r.other_processes.value = air::OtherProcesses{1, 500ULL << 20, 0};
  CHECK(only(r, "other_processes").status == CheckStatus::pass);
  CHECK(only(r, "other_processes").detail == "1 process using 500 MiB; memory used 512 MiB of 150.0 GiB");

  r.other_processes.value = air::OtherProcesses{1, 1ULL << 30, 0};
  CHECK(only(r, "other_processes").status == CheckStatus::pass); // exactly 1 GiB is not more than 1 GiB
  r.other_processes.value = air::OtherProcesses{2, (1ULL << 30) + 1, 0};
  CHECK(only(r, "other_processes").status == CheckStatus::warn);
  CHECK(only(r, "other_processes").detail == "2 processes using 1.0 GiB; memory used 512 MiB of 150.0 GiB");

  r.other_processes.value = air::OtherProcesses{1, 0, 1};
  CHECK(only(r, "other_processes").status == CheckStatus::warn);
  CHECK(only(r, "other_processes").detail ==
        "1 process using 0 B (1 not reported); memory used 512 MiB of 150.0 GiB");

  r.other_processes = {std::nullopt, "NVML: No permission"};
  r.memory = {std::nullopt, "not supported"};
  CHECK(only(r, "other_processes").status == CheckStatus::skip);
  CHECK(only(r, "other_processes").detail == "NVML: No permission");
}

TEST_CASE("a lost GPU fails first, with NVML's reason", "[health]") {
  GpuHealthReading r;
  r.lost = true;
  r.lost_why = "GPU is lost";
  r.ecc_uncorrected_volatile.why = "NVML: GPU is lost";
  const auto checks = air::evaluate_gpu_health(r);
  REQUIRE(checks.size() == 7);
  CHECK(checks[0].name == "gpu");
  CHECK(checks[0].status == CheckStatus::fail);
  CHECK(checks[0].detail == "GPU is lost: GPU is lost");
  CHECK(checks[1].status == CheckStatus::skip);
  CHECK(checks[1].detail == "NVML: GPU is lost");
  CHECK(air::overall_status(checks) == CheckStatus::fail);
}

TEST_CASE("verdicts combine worst first", "[health]") {
  CHECK(air::worse(CheckStatus::pass, CheckStatus::warn) == CheckStatus::warn);
  CHECK(air::worse(CheckStatus::fail, CheckStatus::warn) == CheckStatus::fail);
  CHECK(air::worse(CheckStatus::skip, CheckStatus::pass) == CheckStatus::pass);
  CHECK(air::overall_status({}) == CheckStatus::skip);
  CHECK(air::overall_status({{"a", CheckStatus::skip, ""}, {"b", CheckStatus::warn, ""}}) ==
        CheckStatus::warn);
  CHECK(air::check_status_name(CheckStatus::fail) == "fail");
  CHECK(air::format_bytes(17) == "17 B");
  CHECK(air::format_bytes(4096) == "4 KiB");
  CHECK(air::format_bytes(256ULL << 20) == "256 MiB");
  CHECK(air::format_bytes(3ULL << 29) == "1.5 GiB");
}

namespace {

constexpr const char* kGoodReport =
    R"({"tool":"air-nccl-check","schema":1,"ok":true,"error":null,"nccl_version":"2.28.3",)"
    R"("devices":[{"index":0,"name":"NVIDIA H200","pci_bus_id":"0000:18:00.0"},)"
    R"({"index":1,"name":"NVIDIA H200","pci_bus_id":"0000:2A:00.0"}],"init_s":1.25,"total_s":1.6,)"
    R"("results":[{"bytes":268435456,"iterations":20,"time_us":925.0,"algbw_gbps":290.2,"busbw_gbps":290.2,"correct":true},)"
    R"({"bytes":1048576,"iterations":200,"time_us":25.0,"algbw_gbps":41.9,"busbw_gbps":41.9,"correct":true}]})";

air::GpuInfo gpu(const std::string& name) {
  air::GpuInfo g;
  g.name = name;
  g.model = air::model_family(name);
  return g;
}

} // namespace

TEST_CASE("parse_nccl_check_json reads air-nccl-check's report", "[health]") {
  auto report = air::parse_nccl_check_json(kGoodReport);
  REQUIRE(report.ok());
  CHECK(report->ok);
  CHECK(report->error.empty());
  CHECK(report->nccl_version == "2.28.3");
  CHECK(report->devices == 2);
  CHECK(report->device_names == std::vector<std::string>{"NVIDIA H200", "NVIDIA H200"});
  CHECK(report->init_s == 1.25);
  REQUIRE(report->samples.size() == 2);
  CHECK(report->samples[0].bytes == 1048576); // sorted by size
  CHECK(report->samples[1].bytes == 268435456);
  CHECK(report->samples[1].iterations == 20);
  CHECK(report->samples[1].busbw_gbps == 290.2);
  CHECK(report->samples[1].correct);

  // NCCL_DEBUG=INFO writes to stdout ahead of the JSON line.
  auto noisy =
      air::parse_nccl_check_json(std::string("host:1:1 [0] NCCL INFO Bootstrap: {x}\n") + kGoodReport + "\n");
  REQUIRE(noisy.ok());
  CHECK(noisy->samples.size() == 2);
}

TEST_CASE("parse_nccl_check_json reports a failed run and rejects bad output", "[health]") {
  auto failed = air::parse_nccl_check_json(
      R"({"tool":"air-nccl-check","schema":1,"ok":false,"error":"ncclCommInitAll: unhandled cuda error","results":[]})");
  REQUIRE(failed.ok());
  CHECK_FALSE(failed->ok);
  CHECK(failed->error == "ncclCommInitAll: unhandled cuda error");
  CHECK(failed->samples.empty());

  auto error_of = [](const std::string& text) {
    auto parsed = air::parse_nccl_check_json(text);
    REQUIRE_FALSE(parsed.ok());
    return parsed.error().message;
  };
  CHECK(error_of("Segmentation fault") == "air-nccl-check output is not JSON: 'Segmentation fault'");
  CHECK(error_of("[1,2]") == "air-nccl-check output is not a JSON object");
  CHECK(error_of(R"({"tool":"other","schema":1})") ==
        "air-nccl-check output does not say \"tool\": \"air-nccl-check\"");
  CHECK(error_of(R"({"tool":"air-nccl-check","schema":2,"ok":true})") ==
        "air-nccl-check output has an unknown schema (expected 1)");
  CHECK(error_of(R"({"tool":"air-nccl-check","schema":1})") == "air-nccl-check output has no boolean 'ok'");
  CHECK(error_of(R"({"tool":"air-nccl-check","schema":1,"ok":true})") ==
        "air-nccl-check output has no 'results' list");
  CHECK(error_of(R"({"tool":"air-nccl-check","schema":1,"ok":true,"results":[]})") ==
        "air-nccl-check output has an empty 'results' list");
  CHECK(
      error_of(
          R"({"tool":"air-nccl-check","schema":1,"ok":true,"results":[{"bytes":4,"time_us":1,"algbw_gbps":1}]})") ==
      "air-nccl-check output results[0] has no number 'busbw_gbps'");
  CHECK(error_of(R"({"tool":"air-nccl-check","schema":1,"ok":true,)"
                 R"("results":[{"bytes":4,"time_us":1,"algbw_gbps":1,"busbw_gbps":1}]})") ==
        "air-nccl-check output results[0] has no boolean 'correct'");
}

TEST_CASE("default_bandwidth_threshold: 100 GB/s for NVLink-class GPUs, else 5", "[health]") {
  auto h200 = air::default_bandwidth_threshold({gpu("NVIDIA H200"), gpu("NVIDIA H200")});
  CHECK(h200.min_busbw_gbps == 100.0);
  CHECK(h200.why == "NVLink-class GPUs (H200)");
  CHECK(air::default_bandwidth_threshold({gpu("NVIDIA A100-SXM4-80GB")}).min_busbw_gbps == 100.0);
  CHECK(air::default_bandwidth_threshold({gpu("NVIDIA B300 SXM6 AC")}).min_busbw_gbps == 100.0);
  CHECK(air::default_bandwidth_threshold({gpu("NVIDIA H100 NVL")}).min_busbw_gbps == 100.0);

  auto pcie = air::default_bandwidth_threshold({gpu("NVIDIA H100 PCIe"), gpu("NVIDIA H100 PCIe")});
  CHECK(pcie.min_busbw_gbps == 5.0);
  CHECK(pcie.why == "PCIe or unknown interconnect");
  CHECK(air::default_bandwidth_threshold({gpu("NVIDIA A100 80GB PCIe")}).min_busbw_gbps == 5.0);
  CHECK(air::default_bandwidth_threshold({gpu("NVIDIA L40S"), gpu("NVIDIA L40S")}).min_busbw_gbps == 5.0);
  CHECK(air::default_bandwidth_threshold({gpu("Tesla V100-SXM2-16GB")}).min_busbw_gbps == 5.0);
  // One non-NVLink GPU in the set decides for all: the ring runs at its speed.
  CHECK(air::default_bandwidth_threshold({gpu("NVIDIA H200"), gpu("NVIDIA L4")}).min_busbw_gbps == 5.0);
}

TEST_CASE("evaluate_bandwidth judges the largest size against the threshold", "[health]") {
  auto report = air::parse_nccl_check_json(kGoodReport);
  REQUIRE(report.ok());
  const air::BandwidthThreshold nvlink{100.0, "NVLink-class GPUs (H200)"};
  auto pass = air::evaluate_bandwidth(*report, nvlink);
  CHECK(pass.name == "nccl_allreduce");
  CHECK(pass.status == CheckStatus::pass);
  CHECK(pass.detail == "busbw 290.2 GB/s at 256 MiB (minimum 100.0 GB/s: NVLink-class GPUs (H200))");

  auto too_slow = air::evaluate_bandwidth(*report, {300.0, "--min-busbw"});
  CHECK(too_slow.status == CheckStatus::fail);
  CHECK(too_slow.detail == "busbw 290.2 GB/s at 256 MiB (minimum 300.0 GB/s: --min-busbw)");
  CHECK(air::evaluate_bandwidth(*report, {290.2, "--min-busbw"}).status == CheckStatus::pass);

  auto wrong = *report;
  wrong.samples[0].correct = false;
  auto wrong_sum = air::evaluate_bandwidth(wrong, nvlink);
  CHECK(wrong_sum.status == CheckStatus::fail);
  CHECK(wrong_sum.detail == "wrong all-reduce sum at 1 MiB");

  air::NcclCheckReport failed;
  failed.error = "cudaGetDeviceCount: no CUDA-capable device is detected";
  auto failure = air::evaluate_bandwidth(failed, nvlink);
  CHECK(failure.status == CheckStatus::fail);
  CHECK(failure.detail == "cudaGetDeviceCount: no CUDA-capable device is detected");

  air::NcclCheckReport empty;
  empty.ok = true;
  CHECK(air::evaluate_bandwidth(empty, nvlink).detail == "no message size was measured");
}

TEST_CASE("NVML health readings of a GPU machine", "[.gpu]") {
  auto library = air::NvmlLibrary::open();
  REQUIRE(library.ok());
  const air::nvml::HealthApi api = library->health_api();
  // Every driver of the last years exports these; a null here is a typo in a name.
  CHECK(api.device_get_handle_by_uuid != nullptr);
  CHECK(api.device_get_total_ecc_errors != nullptr);
  CHECK(api.device_get_temperature != nullptr);
  CHECK(api.device_get_temperature_threshold != nullptr);
  CHECK(api.device_get_clocks_event_reasons != nullptr);
  CHECK(api.device_get_compute_running_processes != nullptr);
  CHECK(api.device_get_remapped_rows != nullptr);

  auto count = library->device_count();
  REQUIRE(count.ok());
  REQUIRE(*count >= 1);
  for (unsigned int i = 0; i < *count; ++i) {
    auto gpu_info = library->device_info(i);
    REQUIRE(gpu_info.ok());
    auto reading = library->read_health(gpu_info->uuid);
    REQUIRE(reading.ok());
    INFO("GPU " << i << " " << gpu_info->name);
    CHECK(reading->uuid == gpu_info->uuid);
    CHECK(reading->name == gpu_info->name);
    CHECK_FALSE(reading->lost);
    REQUIRE(reading->temperature.value.has_value());
    CHECK(reading->temperature.value->current_c > 0);
    CHECK(reading->temperature.value->current_c < 120);
    REQUIRE(reading->temperature.value->slowdown_c.has_value());
    CHECK(*reading->temperature.value->slowdown_c > 60);
    REQUIRE(reading->memory.value.has_value());
    CHECK(reading->memory.value->total == gpu_info->memory_total_bytes);
    CHECK(reading->clocks_event_reasons.value.has_value());
    CHECK(reading->other_processes.value.has_value());
    if (gpu_info->model == "H100" || gpu_info->model == "H200" || gpu_info->model == "A100") {
      CHECK(reading->remapped_rows.value.has_value());            // Ampere and later remap rows
      CHECK(reading->ecc_uncorrected_volatile.value.has_value()); // ECC is on in data centre parts
    }
    const auto checks = air::evaluate_gpu_health(*reading);
    for (const auto& check : checks)
      INFO(check.name << ": " << air::check_status_name(check.status) << " " << check.detail);
    CHECK(checks.size() == 6);
    CHECK(air::overall_status(checks) != CheckStatus::fail); // a healthy test machine
  }
  auto missing = library->read_health("GPU-00000000-0000-0000-0000-00000000dead");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "NVML has no GPU GPU-00000000-0000-0000-0000-00000000dead");
}
