// `air-run --check`: the preflight. Reports the environment (the ranks'
// Python, torch, its backends, the settings in force); then selects GPUs like a run, reads their
// health from NVML, runs air-nccl-check across them, judges everything
// (core/preflight/health.cpp, core/preflight/nccl_check.cpp) and prints a table or JSON.
#include "cli/commands.hpp"
#include "core/base/text.hpp"
#include "core/hw/hardware.hpp"
#include "core/hw/nvml.hpp"
#include "core/os/capture.hpp"
#include "core/os/host.hpp"
#include "core/os/signals.hpp"
#include "core/preflight/check_report.hpp"
#include "core/preflight/nccl_check.hpp"
#include "core/pyenv/cache.hpp"
#include "core/spec/spec.hpp"

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

/// How long air-nccl-check may take before it is killed. It needs about 2 s
/// on two NVLink GPUs; a minute covers slow first CUDA initialisation (module
/// loading on a cold driver) while still ending a hung collective.
constexpr int kNcclTimeoutDefaultS = 60;

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

/// run_captured with a deadline that SIGINT, SIGTERM or SIGHUP cut short:
/// the helper's group is stopped and air-run ends of the signal. The torch
/// probe and the NCCL check may take a minute each, and air-run's signals are
/// blocked for its signalfd: `--check` ignored SIGTERM for up to 60 s.
Expected<CapturedRun> run_interruptible(const std::vector<std::string>& argv, const Environment& env,
                                        std::chrono::milliseconds timeout) {
  auto watch = InterruptWatch::open();
  if (!watch) return watch.error();
  CaptureOptions options;
  options.timeout = timeout;
  options.stop_fd = watch->fd();
  options.stop_grace = std::chrono::milliseconds(1000);
  auto run = run_captured(argv, env, options);
  if (run && run->stopped)
    if (const int signal = watch->take(); signal > 0) die_of_signal(signal);
  return run;
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
  auto run = run_interruptible({part.binary}, child_env, timeout);
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

/// How long the torch probe may take: importing torch reads hundreds of
/// megabytes of libraries, slow on a cold page cache or a network disk.
constexpr auto kTorchProbeTimeout = std::chrono::seconds(60);

/// "2 (NVIDIA H100 80GB HBM3)", or "none (why)" when the run would use the CPU.
std::string describe_gpus(const Selection& selection, const Hardware& hw, bool cpu_requested) {
  if (selection.cpu) {
    return fmt::format("none ({})", cpu_requested
                                        ? std::string("accelerator type CPU requested")
                                        : (hw.reason.empty() ? std::string("none detected") : hw.reason));
  }
  return fmt::format("{} ({})", selection.gpus.size(),
                     selection.gpus.empty() ? selection.accelerator_type : selection.gpus.front().name);
}

/// The report's environment part: asks the ranks' interpreter about itself
/// and torch, so the answer is the one a launch would meet.
EnvironmentPart check_environment(const LaunchSpec& spec, const Selection& selection, const Hardware& hw,
                                  const Environment& env) {
  EnvironmentPart part;
  part.python = describe_interpreter(spec.python.value, env);
  part.gpus = describe_gpus(selection, hw, !spec.accelerator_type.value.empty());
  part.settings = settings_in_force(describe_spec(spec));
  auto probe = run_interruptible(torch_probe_argv(spec.python.value), env, kTorchProbeTimeout);
  if (!probe) {
    part.torch.detail = "cannot run " + spec.python.value + ": " + probe.error().message;
  } else {
    const std::string fallback =
        probe->timed_out
            ? fmt::format("importing torch did not finish within {} s (killed)", kTorchProbeTimeout.count())
            : fmt::format("the interpreter ended with {}: {}", probe->status.describe(),
                          tail_lines(probe->err, 1));
    read_torch_probe(probe->out, fallback, part);
  }
  return part;
}

/// A node without GPUs: the environment alone is the report, and it passes
/// when the interpreter runs and imports torch (exit 0), else exit 1.
int report_environment_only(const EnvironmentPart& part, bool json_output) {
  const int exit_code = part.torch.status == CheckStatus::pass ? 0 : 1;
  const std::string status(check_status_name(part.torch.status));
  if (json_output) {
    const nlohmann::json doc{
        {"status", status}, {"exit_code", exit_code}, {"environment", environment_json(part)}};
    std::fputs((doc.dump(2) + "\n").c_str(), stdout);
  } else {
    std::fputs(
        (environment_text(part) + "GPU checks: skipped, no GPU\nResult: " + upper(status) + "\n").c_str(),
        stdout);
  }
  return exit_code;
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
  const EnvironmentPart environment = check_environment(*spec, *selection, hw, env);
  // Without GPUs there is nothing for NVML or NCCL: the report is the environment.
  if (selection->cpu) return report_environment_only(environment, spec->json.value);

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
    auto doc = check_report_json(*selection, gpus, nccl, status, exit_code, duration_s);
    doc["environment"] = environment_json(environment);
    std::fputs((doc.dump(2) + "\n").c_str(), stdout);
  } else {
    std::fputs((environment_text(environment) +
                check_report_text(*selection, gpus, nccl, status, duration_s, failed, warned, skipped))
                   .c_str(),
               stdout);
  }
  return exit_code;
}

} // namespace air::cli
