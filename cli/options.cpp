#include "cli/options.hpp"

#include "core/os/host.hpp"

#include <fmt/format.h>

namespace air::cli {

namespace {

/// Legacy serverless_gpu flags, passed to the spec module under their legacy key.
struct LegacyFlag {
  std::string_view key;
  std::string_view flag;
  std::string_view doc;
};
constexpr LegacyFlag k_legacy_flags[] = {
    {"gpus", "--gpus", "deprecated: use --num-accelerators"},
    {"gpu_type", "--gpu-type", "deprecated: use --accelerator-type"},
};

std::string names_for(const SpecKey& key) {
  std::string names;
  if (!key.short_flag.empty()) names += fmt::format("-{},", key.short_flag);
  names += fmt::format("--{}", key.flag);
  if (key.key == "live") names += ",!--no-live"; // CLI11: a '!' name is the flag's negation
  return names; // torchrun's underscore spellings and prefixes: normalize_launcher_args
}

std::string help_for(const SpecKey& key) {
  std::string help(key.doc);
  if (!key.default_text.empty()) help += fmt::format(" [default: {}]", key.default_text);
  if (!key.env.empty()) help += fmt::format(" (env {})", key.env);
  return help;
}

} // namespace

void register_options(CLI::App& app, CliOptions& options) {
  app.add_option("-f,--spec", options.spec_file, "YAML spec file (see configs/)");
  app.add_flag("--dry-run", options.dry_run,
               "print the resolved spec with each value's origin and the per-rank plan; launch nothing");
  app.add_flag("--list-gpus", options.list_gpus, "print the detected GPUs (with --json as JSON) and exit");
  app.add_flag("--version", options.version, "print the version and exit");
  app.add_flag(
      "--check", options.check,
      "preflight: GPU health (NVML) and an NCCL all-reduce over the selected GPUs; exit 0 ok, 1 failed");
  app.add_option(
         "--min-busbw", options.min_busbw,
         "with --check: minimum all-reduce bus bandwidth in GB/s at the largest size [default: 100 for "
         "NVLink-class GPUs, else 5]")
      ->type_name("GBPS")
      ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--torch-distributor", options.torch_distributor,
               "run TARGET once as an unchanged TorchDistributor script (pyspark import provided by air)");
  app.add_flag("--list-envs", options.list_envs, "list the cached Python environments and exit");
  app.add_flag(
      "--prune-envs", options.prune_envs,
      "remove cached Python environments (not in use; with --older-than, only those unused that long)");
  app.add_option("--older-than", options.older_than, "with --prune-envs: a duration like 30d, 12h or 90m");

  app.add_flag("--print-spec-table", options.print_spec_table, "print the spec key table as Markdown")
      ->group(""); // hidden: keeps README.md in step with the key table (tests/e2e/test_docs.sh)

  for (const auto& key : spec_keys()) {
    if (key.flag.empty()) continue;
    auto& slot = options.slots.emplace_back();
    slot.key = &key;
    slot.spelling = fmt::format("--{}", key.flag);
    if (key.type == ValueType::boolean) {
      app.add_flag(names_for(key), slot.count, help_for(key));
      continue;
    }
    auto* opt = app.add_option(names_for(key), slot.texts, help_for(key));
    // One value per occurrence; repeats accumulate (--env A=1 --env B=2) and
    // the value never swallows the TARGET that follows it.
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->expected(1)->allow_extra_args(false);
    opt->type_name(key.type == ValueType::string_map ? "KEY=VALUE" : "VALUE");
  }
  for (const auto& legacy : k_legacy_flags) {
    auto& slot = options.slots.emplace_back();
    slot.key = nullptr;
    slot.spelling = std::string(legacy.flag);
    auto* opt = app.add_option(std::string(legacy.flag), slot.texts, std::string(legacy.doc));
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->expected(1)->allow_extra_args(false);
  }
}

Expected<ResolvedSpec> resolve_cli_spec(const CliOptions& options, const Environment& env) {
  SpecInputs inputs;
  inputs.environment = env;
  inputs.flags = options.flag_values();
  inputs.command = options.command;
  if (!options.spec_file.empty()) {
    auto text = read_text_file(options.spec_file, "spec file");
    if (!text) return text.error();
    inputs.file_text = std::move(*text);
    inputs.file_path = options.spec_file;
  }
  return resolve_spec(inputs);
}

std::vector<std::tuple<std::string, std::string, std::string>> CliOptions::flag_values() const {
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (const auto& slot : slots) {
    const std::string key =
        slot.key ? std::string(slot.key->key) : (slot.spelling == "--gpus" ? "gpus" : "gpu_type");
    if (slot.key && slot.key->type == ValueType::boolean) {
      if (slot.count > 0) out.emplace_back(key, "true", slot.spelling);
      if (slot.count < 0) out.emplace_back(key, "false", slot.spelling); // --flag=false (CLI11 counts -1)
      continue;
    }
    for (const auto& text : slot.texts) out.emplace_back(key, text, slot.spelling);
  }
  return out;
}

std::vector<KnownFlag> known_flags(const CLI::App& app) {
  std::vector<KnownFlag> known;
  for (const CLI::Option* opt : app.get_options()) {
    const bool takes_value = opt->get_items_expected_max() > 0; // flags expect 0 items
    const auto& snames = opt->get_snames();
    for (const auto& lname : opt->get_lnames()) {
      known.push_back({lname, snames.empty() ? "" : snames.front(), takes_value});
    }
  }
  return known;
}

} // namespace air::cli
