// Renderings of detected hardware for `air-run --list-gpus [--json]`.
#include "core/hw/hardware.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace air {

namespace {

std::string memory_text(std::uint64_t bytes) {
  if (bytes == 0) return "-";
  return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / static_cast<double>(1ULL << 30));
}

} // namespace

std::string describe_hardware(const Hardware& hw) {
  std::string out =
      fmt::format("accelerator type: {}\nsource: {}\n", detected_accelerator_type(hw), hw.source);
  if (hw.gpus.empty()) {
    out += fmt::format("no GPU found: {}\n", hw.reason.empty() ? "no GPU detected" : hw.reason);
  } else {
    constexpr std::size_t kColumns = 6;
    std::vector<std::array<std::string, kColumns>> rows;
    rows.push_back({"index", "name", "model", "uuid", "pci bus id", "memory"});
    for (const auto& gpu : hw.gpus) {
      rows.push_back({std::to_string(gpu.index), gpu.name, gpu.model, gpu.uuid, gpu.pci_bus_id,
                      memory_text(gpu.memory_total_bytes)});
    }
    std::array<std::size_t, kColumns> width{};
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < kColumns; ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (const auto& row : rows) {
      std::string line;
      for (std::size_t c = 0; c < kColumns; ++c) {
        line += c + 1 < kColumns ? fmt::format("{:<{}}  ", row[c], width[c]) : row[c];
      }
      out += line + "\n";
    }
  }
  if (!hw.cuda_visible_devices_set) out += "CUDA_VISIBLE_DEVICES: unset\n";
  for (const auto& note : hw.notes) out += note + "\n";
  if (!hw.gpus.empty()) {
    out += "NVML order is not CUDA order: ranks are bound by UUID (rows are in "
           "CUDA-visible order; "
           "index is NVML's)\n";
  }
  return out;
}

nlohmann::ordered_json gpu_info_json(const GpuInfo& gpu) {
  return {{"index", gpu.index}, {"uuid", gpu.uuid},   {"pci_bus_id", gpu.pci_bus_id},
          {"name", gpu.name},   {"model", gpu.model}, {"memory_total_bytes", gpu.memory_total_bytes}};
}

std::string hardware_json(const Hardware& hw) {
  nlohmann::ordered_json gpus = nlohmann::ordered_json::array();
  for (const auto& gpu : hw.gpus) gpus.push_back(gpu_info_json(gpu));
  nlohmann::ordered_json doc = {
      {"accelerator_type", detected_accelerator_type(hw)},
      {"source", hw.source},
      {"reason", hw.reason},
      // null when unset: "" is a real value that hides every GPU.
      {"cuda_visible_devices", hw.cuda_visible_devices_set ? nlohmann::ordered_json(hw.cuda_visible_devices)
                                                           : nlohmann::ordered_json(nullptr)},
      {"notes", hw.notes},
      {"gpus", gpus},
  };
  return doc.dump(2);
}

} // namespace air
