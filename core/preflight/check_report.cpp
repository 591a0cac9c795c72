#include "core/preflight/check_report.hpp"

#include "core/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace air {

namespace {

using nlohmann::json;

nlohmann::json check_json(const CheckResult& check) {
  return {{"name", check.name}, {"status", check_status_name(check.status)}, {"detail", check.detail}};
}

template <typename T, typename F> json probe_json(const Probe<T>& probe, F&& to_json) {
  if (probe.value) return to_json(*probe.value);
  return {{"unavailable", probe.why}};
}

json reading_json(const GpuHealthReading& r) {
  auto number = [](auto v) { return json(v); };
  return {
      {"ecc_uncorrected_volatile", probe_json(r.ecc_uncorrected_volatile, number)},
      {"ecc_uncorrected_aggregate", probe_json(r.ecc_uncorrected_aggregate, number)},
      {"ecc_corrected_volatile", probe_json(r.ecc_corrected_volatile, number)},
      {"retired_pages",
       probe_json(
           r.retired_pages,
           [](const RetiredPages& p) {
             return json{{"single_bit", p.single_bit}, {"double_bit", p.double_bit}, {"pending", p.pending}};
           })},
      {"remapped_rows", probe_json(r.remapped_rows,
                                   [](const RemappedRows& p) {
                                     return json{{"correctable", p.correctable},
                                                 {"uncorrectable", p.uncorrectable},
                                                 {"pending", p.pending},
                                                 {"failure", p.failure}};
                                   })},
      {"temperature", probe_json(r.temperature,
                                 [](const Temperature& t) {
                                   json j{{"current_c", t.current_c}};
                                   j["slowdown_c"] = t.slowdown_c ? json(*t.slowdown_c) : json(nullptr);
                                   j["shutdown_c"] = t.shutdown_c ? json(*t.shutdown_c) : json(nullptr);
                                   return j;
                                 })},
      {"clocks_event_reasons", probe_json(r.clocks_event_reasons,
                                          [](std::uint64_t bits) {
                                            return json{{"mask", bits}, {"names", clocks_event_names(bits)}};
                                          })},
      {"other_processes", probe_json(r.other_processes,
                                     [](const OtherProcesses& p) {
                                       return json{{"count", p.count},
                                                   {"used_bytes", p.used_bytes},
                                                   {"unknown_usage", p.unknown_usage}};
                                     })},
      {"memory", probe_json(r.memory,
                            [](const MemoryUsage& m) {
                              return json{{"total", m.total}, {"used", m.used}};
                            })},
  };
}

} // namespace

nlohmann::json check_report_json(const Selection& selection, const std::vector<GpuCheck>& gpus,
                                 const NcclPart& nccl, CheckStatus status, int exit_code, double duration_s) {
  json out{{"status", check_status_name(status)},
           {"exit_code", exit_code},
           {"duration_s", duration_s},
           {"accelerator_type", selection.accelerator_type}};
  json gpu_list = json::array();
  for (const auto& entry : gpus) {
    json checks = json::array();
    for (const auto& check : entry.checks) checks.push_back(check_json(check));
    json g{{"index", entry.gpu.index},
           {"uuid", entry.gpu.uuid},
           {"name", entry.gpu.name},
           {"pci_bus_id", entry.gpu.pci_bus_id},
           {"status", check_status_name(overall_status(entry.checks))},
           {"checks", checks}};
    if (entry.reading) g["readings"] = reading_json(*entry.reading);
    gpu_list.push_back(std::move(g));
  }
  out["gpus"] = gpu_list;
  json n = check_json(nccl.check);
  if (nccl.threshold) {
    n["min_busbw_gbps"] = nccl.threshold->min_busbw_gbps;
    n["threshold_reason"] = nccl.threshold->why;
  }
  if (!nccl.binary.empty()) n["binary"] = nccl.binary;
  if (nccl.report) {
    n["nccl_version"] = nccl.report->nccl_version;
    n["init_s"] = nccl.report->init_s;
    n["total_s"] = nccl.report->total_s;
    json results = json::array();
    for (const auto& s : nccl.report->samples) {
      results.push_back({{"bytes", s.bytes},
                         {"iterations", s.iterations},
                         {"time_us", s.time_us},
                         {"algbw_gbps", s.algbw_gbps},
                         {"busbw_gbps", s.busbw_gbps},
                         {"correct", s.correct}});
    }
    n["results"] = results;
  }
  if (!nccl.stderr_tail.empty()) n["stderr_tail"] = nccl.stderr_tail;
  out["nccl"] = n;
  return out;
}

namespace {

void print_check(const CheckResult& check, std::string& out) {
  out +=
      fmt::format("  {:<4}  {:<16} {}\n", upper(check_status_name(check.status)), check.name, check.detail);
}

} // namespace

std::string check_report_text(const Selection& selection, const std::vector<GpuCheck>& gpus,
                              const NcclPart& nccl, CheckStatus status, double duration_s, int failed,
                              int warned, int skipped) {
  std::string out = fmt::format("air-run preflight: {} GPU{} ({})\n", gpus.size(),
                                gpus.size() == 1 ? "" : "s", selection.accelerator_type);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const auto& g = gpus[i].gpu;
    out += fmt::format("GPU {}  {}  {}  {}\n", i, g.name, g.uuid, g.pci_bus_id);
    for (const auto& check : gpus[i].checks) print_check(check, out);
  }
  out += "NCCL all-reduce";
  if (nccl.report && nccl.report->ok) {
    out += fmt::format(" (NCCL {}, {} GPUs, init {:.2f} s, total {:.2f} s)", nccl.report->nccl_version,
                       nccl.report->devices, nccl.report->init_s, nccl.report->total_s);
  }
  out += "\n";
  if (nccl.report && !nccl.report->samples.empty()) {
    out += fmt::format("  {:>9}  {:>6}  {:>10}  {:>10}  {:>10}  {}\n", "size", "iters", "time us",
                       "algbw GB/s", "busbw GB/s", "sum");
    for (const auto& s : nccl.report->samples) {
      out += fmt::format("  {:>9}  {:>6}  {:>10.1f}  {:>10.1f}  {:>10.1f}  {}\n", format_bytes(s.bytes),
                         s.iterations, s.time_us, s.algbw_gbps, s.busbw_gbps, s.correct ? "ok" : "WRONG");
    }
  }
  print_check(nccl.check, out);
  if (!nccl.stderr_tail.empty() && nccl.check.status == CheckStatus::fail) {
    out += "  air-nccl-check stderr:\n";
    std::size_t start = 0;
    while (start < nccl.stderr_tail.size()) {
      const std::size_t end = std::min(nccl.stderr_tail.find('\n', start), nccl.stderr_tail.size());
      out += "    " + nccl.stderr_tail.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  out += fmt::format("Result: {} ({} failed, {} warning{}, {} skipped) in {:.1f} s\n",
                     upper(check_status_name(status)), failed, warned, warned == 1 ? "" : "s", skipped,
                     duration_s);
  return out;
}

std::string tail_lines(const std::string& text, int lines) {
  std::size_t pos = text.size();
  while (pos > 0 && (text[pos - 1] == '\n')) --pos;
  const std::size_t end = pos;
  for (int n = 0; n < lines && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  const std::size_t begin = pos == 0 ? 0 : pos + 1;
  return text.substr(begin, end - begin);
}

std::vector<std::string> torch_probe_argv(const std::string& python) {
  // getattr: a torch built without distributed support lacks the is_*_available functions.
  return {python, "-c",
          "import json\n"
          "try:\n"
          "    import torch, torch.distributed as d\n"
          "    names = ('gloo', 'nccl', 'mpi')\n"
          "    have = [n for n in names if getattr(d, 'is_%s_available' % n, lambda: False)()]\n"
          "    print(json.dumps({'version': torch.__version__, 'backends': have}))\n"
          "except Exception as e:\n"
          "    print(json.dumps({'error': '%s: %s' % (type(e).__name__, e)}))\n"};
}

void read_torch_probe(const std::string& output, const std::string& fallback, EnvironmentPart& part) {
  const std::string line = tail_lines(output, 1);
  const json doc = json::parse(line, nullptr, false);
  part.torch.status = CheckStatus::fail;
  if (!doc.is_object()) {
    part.torch.detail = fallback.empty() ? "the interpreter gave no answer about torch" : fallback;
  } else if (doc.contains("version") && doc["version"].is_string()) {
    part.torch.status = CheckStatus::pass;
    part.torch.detail = doc["version"].get<std::string>();
    for (const auto& name : doc.value("backends", json::array()))
      if (name.is_string()) part.backends.push_back(name.get<std::string>());
  } else {
    part.torch.detail = doc.value("error", std::string("torch does not import"));
  }
}

std::vector<std::string> settings_in_force(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const auto& line : lines) {
    const std::size_t origin = line.rfind("  (");
    if (origin == std::string::npos || line.compare(origin + 3, 7, "default") != 0) out.push_back(line);
  }
  return out;
}

nlohmann::json environment_json(const EnvironmentPart& env) {
  return {{"python", env.python},
          {"torch", check_json(env.torch)},
          {"backends", env.backends},
          {"gpus", env.gpus},
          {"settings", env.settings}};
}

std::string environment_text(const EnvironmentPart& env) {
  std::string out = "Environment\n";
  out += fmt::format("  Python    {}\n", env.python);
  if (env.torch.status == CheckStatus::pass) {
    out += fmt::format("  torch     {} (distributed backends: {})\n", env.torch.detail,
                       env.backends.empty() ? std::string("none") : join(env.backends, ", "));
  } else {
    out += fmt::format("  torch     FAIL {}\n", env.torch.detail);
  }
  out += fmt::format("  GPUs      {}\n", env.gpus);
  out += env.settings.empty() ? "  Settings  all defaults\n" : "  Settings\n";
  for (const auto& line : env.settings) out += "    " + line + "\n";
  return out;
}

} // namespace air
