// air-nccl-check's JSON read back, and the bandwidth verdict. Pure: the
// process side lives in core/os/capture.cpp and cli/cmd_check.cpp.
#include "core/preflight/nccl_check.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>

namespace air {

namespace {

using nlohmann::json;

Error bad_output(const std::string& what) { return usage_error("air-nccl-check output " + what); }

bool contains_ci(std::string_view haystack, std::string_view needle) {
  auto it = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != haystack.end();
}

/// A number from `object[key]`, or an error naming the key.
Expected<double> number_at(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number())
    return bad_output(fmt::format("{} has no number '{}'", where, key));
  return it->get<double>();
}

/// The last line that starts with '{': NCCL_DEBUG=INFO logs go to stdout too,
/// ahead of the JSON, which the tool prints last, on one line.
std::string_view json_line(std::string_view text) {
  std::string_view rest = text;
  while (!rest.empty()) {
    while (!rest.empty() && (rest.back() == '\n' || rest.back() == '\r')) rest.remove_suffix(1);
    const std::size_t newline = rest.rfind('\n');
    const std::string_view line = newline == std::string_view::npos ? rest : rest.substr(newline + 1);
    if (!line.empty() && line.front() == '{') return line;
    if (newline == std::string_view::npos) break;
    rest = rest.substr(0, newline);
  }
  return text;
}

} // namespace

Expected<NcclCheckReport> parse_nccl_check_json(std::string_view text) {
  const std::string_view line = json_line(text);
  const json doc = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    const auto first_line = line.substr(0, line.find('\n'));
    return bad_output(fmt::format("is not JSON: '{}'", first_line.substr(0, 200)));
  }
  if (!doc.is_object()) return bad_output("is not a JSON object");
  if (doc.value("tool", "") != "air-nccl-check")
    return bad_output("does not say \"tool\": \"air-nccl-check\"");
  if (!doc.contains("schema") || !doc["schema"].is_number_integer() || doc["schema"].get<int>() != 1) {
    return bad_output("has an unknown schema (expected 1)");
  }
  NcclCheckReport report;
  if (!doc.contains("ok") || !doc["ok"].is_boolean()) return bad_output("has no boolean 'ok'");
  report.ok = doc["ok"].get<bool>();
  if (doc.contains("error") && doc["error"].is_string()) report.error = doc["error"].get<std::string>();
  if (!report.ok && report.error.empty()) report.error = "air-nccl-check failed without a reason";
  report.nccl_version = doc.value("nccl_version", "");
  report.init_s = doc.value("init_s", 0.0);
  report.total_s = doc.value("total_s", 0.0);
  if (doc.contains("devices") && doc["devices"].is_array()) {
    for (const auto& device : doc["devices"]) {
      report.device_names.push_back(device.is_object() ? device.value("name", "") : std::string());
    }
    report.devices = static_cast<int>(report.device_names.size());
  }

  const auto results = doc.find("results");
  if (results == doc.end() || !results->is_array()) {
    if (!report.ok) return report; // a failure before the sweep has no results
    return bad_output("has no 'results' list");
  }
  for (std::size_t i = 0; i < results->size(); ++i) {
    const json& row = (*results)[i];
    const std::string where = fmt::format("results[{}]", i);
    if (!row.is_object()) return bad_output(where + " is not an object");
    BandwidthSample sample;
    auto bytes = number_at(row, "bytes", where);
    if (!bytes) return bytes.error();
    if (*bytes <= 0) return bad_output(where + " has a non-positive 'bytes'");
    sample.bytes = static_cast<std::uint64_t>(*bytes);
    auto time_us = number_at(row, "time_us", where);
    if (!time_us) return time_us.error();
    auto algbw = number_at(row, "algbw_gbps", where);
    if (!algbw) return algbw.error();
    auto busbw = number_at(row, "busbw_gbps", where);
    if (!busbw) return busbw.error();
    sample.time_us = *time_us;
    sample.algbw_gbps = *algbw;
    sample.busbw_gbps = *busbw;
    sample.iterations = row.value("iterations", 0);
    if (!row.contains("correct") || !row["correct"].is_boolean()) {
      return bad_output(where + " has no boolean 'correct'");
    }
    sample.correct = row["correct"].get<bool>();
    report.samples.push_back(sample);
  }
  std::sort(report.samples.begin(), report.samples.end(),
            [](const BandwidthSample& a, const BandwidthSample& b) { return a.bytes < b.bytes; });
  if (report.ok && report.samples.empty()) return bad_output("has an empty 'results' list");
  return report;
}

// Why these two numbers (docs/preflight.md has the long form):
// - NVLink-class parts reach 150-250 GB/s (A100, NVLink 3) and 290 GB/s and
//   more (H100/H200, NVLink 4; B200 and later, NVLink 5) of all-reduce bus
//   bandwidth at 256 MiB between two GPUs. 100 GB/s is well under half of the
//   slowest of them, so a healthy node never trips it, yet above what PCIe
//   Gen5 x16 can carry at all (64 GB/s per direction): below it, NCCL is not
//   using NVLink (a link down, P2P disabled, a bad topology), which is
//   exactly the fault to catch before a long job.
// - Anything else (PCIe cards, unknown parts) gets 5 GB/s: under what even
//   PCIe Gen3 x16 delivers through a CPU socket link (about 10 GB/s), so only
//   a broken path (traffic bounced through host memory on a misconfigured
//   IOMMU/ACS setup, a link trained at x1) fails.
BandwidthThreshold default_bandwidth_threshold(const std::vector<GpuInfo>& gpus) {
  static constexpr std::array<std::string_view, 10> kNvlinkModels = {
      "A100", "A800", "H100", "H800", "H200", "GH200", "B200", "GB200", "B300", "GB300"};
  if (gpus.empty()) return {5.0, "no GPU"};
  bool nvlink = true;
  for (const auto& gpu : gpus) {
    const bool model_ok =
        std::find(kNvlinkModels.begin(), kNvlinkModels.end(), gpu.model) != kNvlinkModels.end();
    // "NVIDIA H100 PCIe", "NVIDIA A100 80GB PCIe": the PCIe cards of these
    // families have no NVLink unless bridged, so they get the PCIe floor.
    if (!model_ok || contains_ci(gpu.name, "PCIe")) nvlink = false;
  }
  if (nvlink) return {100.0, fmt::format("NVLink-class GPUs ({})", gpus.front().model)};
  return {5.0, "PCIe or unknown interconnect"};
}

CheckResult evaluate_bandwidth(const NcclCheckReport& report, const BandwidthThreshold& threshold) {
  CheckResult result{"nccl_allreduce", CheckStatus::fail, ""};
  if (!report.ok) {
    result.detail = report.error;
    return result;
  }
  for (const auto& sample : report.samples) {
    if (!sample.correct) {
      result.detail = fmt::format("wrong all-reduce sum at {}", format_bytes(sample.bytes));
      return result;
    }
  }
  if (report.samples.empty()) {
    result.detail = "no message size was measured";
    return result;
  }
  const BandwidthSample& largest = report.samples.back();
  result.detail = fmt::format("busbw {:.1f} GB/s at {} (minimum {:.1f} GB/s: {})", largest.busbw_gbps,
                              format_bytes(largest.bytes), threshold.min_busbw_gbps, threshold.why);
  if (largest.busbw_gbps >= threshold.min_busbw_gbps) result.status = CheckStatus::pass;
  return result;
}

} // namespace air
