// `air-run --check`: the preflight. Selects GPUs like a run, reads their
// health from NVML, runs air-nccl-check across them, judges everything
// (core/health.cpp, core/nccl_check.cpp) and prints a table or JSON.
#include "cli/commands.hpp"
#include "core/capture.hpp"
#include "core/hardware.hpp"
#include "core/host.hpp"
#include "core/nccl_check.hpp"
#include "core/nvml.hpp"
#include "core/spec.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <optional>

namespace air::cli {

namespace {

using nlohmann::json;

/// How long air-nccl-check may take before it is killed. It needs about 2 s
/// on two NVLink GPUs; a minute covers slow first CUDA initialisation (module
/// loading on a cold driver) while still ending a hung collective.
constexpr int kNcclTimeoutDefaultS = 60;

/// One GPU's part of the report.
struct GpuCheck {
  GpuInfo gpu;
  std::optional<GpuHealthReading> reading;
  std::vector<CheckResult> checks;
};

/// The all-reduce part of the report.
struct NcclPart {
  CheckResult check{"nccl_allreduce", CheckStatus::skip, ""};
  std::optional<NcclCheckReport> report;
  std::optional<BandwidthThreshold> threshold;
  std::string binary;
  std::string stderr_tail;
};

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

std::string upper(std::string_view text) {
  std::string out(text);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

Expected<LaunchSpec> resolve_check_spec(const CliOptions& options, const Environment& env) {
  auto resolved = resolve_cli_spec(options, env);
  if (!resolved) return resolved.error();
  for (const auto& warning : resolved->warnings) std::fputs((warning + "\n").c_str(), stderr);
  return std::move(resolved->spec);
}

/// NVML health of every selected GPU. Fake GPUs (tests) have no NVML to ask.
std::vector<GpuCheck> check_health(const Selection& selection, const Hardware& hw) {
  std::vector<GpuCheck> out;
  std::optional<NvmlLibrary> library;
  std::string open_error;
  if (hw.source == "nvml") {
    auto opened = NvmlLibrary::open();
    if (opened) {
      library.emplace(std::move(*opened));
    } else {
      open_error = opened.error().message;
    }
  }
  for (const auto& gpu : selection.gpus) {
    GpuCheck entry{gpu, std::nullopt, {}};
    if (hw.source != "nvml") {
      entry.checks.push_back(
          {"nvml", CheckStatus::skip, fmt::format("no NVML readings for GPUs from {}", hw.source)});
    } else if (!library) {
      entry.checks.push_back({"nvml", CheckStatus::fail, open_error});
    } else if (auto reading = library->read_health(gpu.uuid); !reading) {
      entry.checks.push_back({"nvml", CheckStatus::fail, reading.error().message});
    } else {
      entry.checks = evaluate_gpu_health(*reading);
      entry.reading = std::move(*reading);
    }
    out.push_back(std::move(entry));
  }
  return out; // NVML is shut down here, before the all-reduce starts
}

/// Where air-nccl-check is: $AIR_RUN_NCCL_CHECK, else next to air-run when
/// it was built; "" when this build has none.
std::string nccl_check_binary(const Environment& env) {
  if (auto path = env_or(env, "AIR_RUN_NCCL_CHECK"); !path.empty()) return path;
#ifdef AIR_HAVE_NCCL_CHECK
  return self_exe_dir() + "/air-nccl-check";
#else
  return "";
#endif
}

Expected<std::chrono::milliseconds> nccl_timeout(const Environment& env) {
  const std::string text = env_or(env, "AIR_RUN_NCCL_CHECK_TIMEOUT");
  if (text.empty()) return std::chrono::milliseconds(kNcclTimeoutDefaultS * 1000);
  auto parsed = parse_duration(text, "environment variable AIR_RUN_NCCL_CHECK_TIMEOUT");
  if (!parsed) return parsed.error();
  if (parsed->count() <= 0)
    return usage_error("environment variable AIR_RUN_NCCL_CHECK_TIMEOUT: must be positive");
  return *parsed;
}

NcclPart check_nccl(const Selection& selection, const Environment& env, std::chrono::milliseconds timeout,
                    double min_busbw) {
  NcclPart part;
  if (selection.gpus.size() < 2) {
    // NCCL would run it, but with one GPU the all-reduce is a local copy and
    // busbw is 0 by definition (2(n-1)/n): it says nothing about a link.
    part.check.detail = "one GPU: an all-reduce needs at least two";
    return part;
  }
  part.binary = nccl_check_binary(env);
  if (part.binary.empty()) {
    part.check.detail = "not built (CUDA toolkit/NCCL not found at build time)";
    return part;
  }
  part.threshold = min_busbw >= 0 ? BandwidthThreshold{min_busbw, "--min-busbw"}
                                  : default_bandwidth_threshold(selection.gpus);

  Environment child_env = env;
  std::string uuids;
  for (const auto& gpu : selection.gpus) uuids += (uuids.empty() ? "" : ",") + gpu.uuid;
  child_env["CUDA_VISIBLE_DEVICES"] = uuids;
  part.check.status = CheckStatus::fail;
  auto run = run_captured({part.binary}, child_env, timeout);
  if (!run) {
    part.check.detail = "cannot run air-nccl-check: " + run.error().message;
    return part;
  }
  part.stderr_tail = tail_lines(run->err, 5);
  if (run->timed_out) {
    part.check.detail =
        fmt::format("air-nccl-check did not finish within {} s (killed)", timeout.count() / 1000.0);
    return part;
  }
  // 0 ran, 1 ran into an error that the JSON describes; anything else (a
  // crash, a usage error) leaves no report to trust.
  const bool reported = run->status.kind == ExitStatus::Kind::exited && run->status.code <= 1;
  auto report = parse_nccl_check_json(run->out);
  if (!reported || !report) {
    part.check.detail = fmt::format("air-nccl-check ended with {}", run->status.describe());
    if (!report) part.check.detail += "; " + report.error().message;
    return part;
  }
  part.check = evaluate_bandwidth(*report, *part.threshold);
  part.report = std::move(*report);
  return part;
}

json check_json(const CheckResult& check) {
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

json report_json(const Selection& selection, const std::vector<GpuCheck>& gpus, const NcclPart& nccl,
                 CheckStatus status, int exit_code, double duration_s) {
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

void print_check(const CheckResult& check, std::string& out) {
  out +=
      fmt::format("  {:<4}  {:<16} {}\n", upper(check_status_name(check.status)), check.name, check.detail);
}

std::string report_text(const Selection& selection, const std::vector<GpuCheck>& gpus, const NcclPart& nccl,
                        CheckStatus status, double duration_s, int failed, int warned, int skipped) {
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

} // namespace

Expected<int> check_command(const CliOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  if (!options.command.empty()) {
    return usage_error(fmt::format("--check takes no TARGET (got '{}')", options.command.front()));
  }
  const Environment env = current_environment();
  auto spec = resolve_check_spec(options, env);
  if (!spec) return spec.error();
  auto timeout = nccl_timeout(env);
  if (!timeout) return timeout.error();

  const Hardware hw = detect_hardware(env);
  std::optional<std::string> requested;
  if (!spec->accelerator_type.value.empty()) requested = spec->accelerator_type.value;
  auto selection = select_accelerators(requested, spec->num_accelerators.value, spec->cpu_ranks.value, hw,
                                       !spec->cpu_ranks.is_default());
  if (!selection) return selection.error();
  if (selection->cpu) {
    // Not a usage error: the command was right, the node has nothing to
    // check, which is what a preflight exists to report (exit 1).
    const std::string why = requested ? std::string("accelerator type CPU requested")
                                      : (hw.reason.empty() ? std::string("none detected") : hw.reason);
    const std::string message = fmt::format("no GPU to check ({})", why);
    if (spec->json.value) {
      std::fputs((json{{"status", "fail"}, {"exit_code", 1}, {"error", message}}.dump() + "\n").c_str(),
                 stdout);
    }
    std::fputs(fmt::format("air-run: error: {}\n", message).c_str(), stderr);
    return 1;
  }

  const std::vector<GpuCheck> gpus = check_health(*selection, hw);
  const NcclPart nccl = check_nccl(*selection, env, *timeout, options.min_busbw);

  std::vector<CheckResult> all;
  for (const auto& entry : gpus) all.insert(all.end(), entry.checks.begin(), entry.checks.end());
  all.push_back(nccl.check);
  const CheckStatus status = overall_status(all);
  int failed = 0, warned = 0, skipped = 0;
  for (const auto& check : all) {
    failed += check.status == CheckStatus::fail;
    warned += check.status == CheckStatus::warn;
    skipped += check.status == CheckStatus::skip;
  }
  const int exit_code = status == CheckStatus::fail ? 1 : 0;
  const double duration_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (spec->json.value) {
    std::fputs((report_json(*selection, gpus, nccl, status, exit_code, duration_s).dump(2) + "\n").c_str(),
               stdout);
  } else {
    std::fputs(report_text(*selection, gpus, nccl, status, duration_s, failed, warned, skipped).c_str(),
               stdout);
  }
  return exit_code;
}

} // namespace air::cli
