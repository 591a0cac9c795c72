#pragma once

#include "cli/options.hpp"
#include "core/base/error.hpp"

namespace air::cli {

/// The default command: resolve, check, plan, supervise, report. Returns air-run's exit code.
Expected<int> run_command(const CliOptions& options);

/// `air-run --list-gpus [--json]`: what hardware detection sees.
Expected<int> list_gpus_command(const CliOptions& options);

/// `air-run --check [--json] [-n N | --accelerator-type T] [--min-busbw GBPS]`:
/// the environment (the ranks' Python, torch, its backends, the settings in
/// force), then NVML health of the selected GPUs and an NCCL all-reduce across
/// them (docs/preflight.md). Returns 0 when no check failed, 1 when one did;
/// without GPUs, 1 when torch does not import.
Expected<int> check_command(const CliOptions& options);
/// `air-run --list-envs` / `--prune-envs [--older-than D]`: the cached Python
/// environments in the cache directory the spec, flags and variables select.
Expected<int> envs_command(const CliOptions& options);

/// Whether the command line is `air-run report ...` (cli/cmd_report.cpp):
/// the first word after the options is `report` and no file of that name is
/// in the working directory.
bool is_report_command(const CliOptions& options);
/// `air-run report SUMMARY.json [MORE.json ...] [--html PATH]`: the run's
/// HTML page drawn from its summaries (docs/html.md); to stdout without --html.
Expected<int> report_command(const CliOptions& options);

/// `air-run --torch-distributor script.py ARGS`: runs an unchanged
/// TorchDistributor script once, with `pyspark.ml.torch.distributor` provided by air.
Expected<int> torch_distributor_command(const CliOptions& options);

} // namespace air::cli
