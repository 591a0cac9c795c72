#include "cli/options.hpp"

#include "cli/help.hpp"
#include "core/os/host.hpp"
#include "core/os/installed_python.hpp"
#include "core/spec/spec_paths.hpp"

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
  if (!key.default_text.empty() && key.type != ValueType::boolean)
    help += fmt::format(" [default: {}]", key.default_text);
  return help;
}

/// The first long name in a CLI11 names list: "-n,--num-accelerators" -> "--num-accelerators".
std::string first_long_name(std::string_view names) {
  const auto start = names.find("--");
  return std::string(names.substr(start, names.find(',', start) - start));
}

/// One key's flag: a switch for booleans, else one value per occurrence;
/// repeats accumulate (--env A=1 --env B=2) and the value never swallows the
/// TARGET that follows it.
CLI::Option* add_key_option(CLI::App& app, CliOptions& options, const SpecKey& key, const std::string& names,
                            const std::string& help) {
  auto& slot = options.slots.emplace_back();
  slot.key = &key;
  slot.spelling = first_long_name(names);
  if (key.type == ValueType::boolean) return app.add_flag(names, slot.count, help);
  auto* opt = app.add_option(names, slot.texts, help);
  opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->expected(1)->allow_extra_args(false);
  return opt->type_name(std::string(key.value_name));
}

} // namespace

void register_options(CLI::App& app, CliOptions& options) {
  namespace G = key_group;
  const std::string launch(G::launch), accelerators(G::accelerators), environment(G::environment);
  app.add_option("-f,--spec", options.spec_file,
                 "YAML spec file, - for standard input (examples in configs/)")
      ->type_name("FILE")
      ->group(launch);
  app.add_flag("--dry-run", options.dry_run,
               "print the resolved spec with each value's origin and the per-rank plan; launch nothing")
      ->group(launch);
  for (const auto& key : spec_keys()) {
    if (key.flag.empty()) continue;
    add_key_option(app, options, key, names_for(key), help_for(key))->group(std::string(key.group));
    if (key.key != "preload") continue;
    // --no-preload is `--preload none` as a switch (CLI11 negates flags only).
    auto& off = options.slots.emplace_back();
    off.key = &key;
    off.spelling = "--no-preload";
    off.text_when_set = "none";
    // Not CLI11's excludes(): a counting flag holds a forced default ("0"),
    // which CLI11 2.4's excludes() counts as given, so `--preload torch` alone
    // was refused there (CliOptions::conflict checks the pair instead).
    app.add_flag("--no-preload", off.count, "no warm start: every rank starts a fresh interpreter")
        ->group(std::string(key.group));
  }
  // air-run's own commands follow the keys of their heading.
  app.add_flag("--torch-distributor", options.torch_distributor,
               "run TARGET once as an unchanged TorchDistributor script (pyspark import provided by air)")
      ->group(launch);
  app.add_flag("--list-gpus", options.list_gpus, "print the detected GPUs (with --json as JSON) and exit")
      ->group(accelerators);
  app.add_flag(
         "--check", options.check,
         "preflight: GPU health (NVML) and an NCCL all-reduce over the selected GPUs; exit 0 ok, 1 failed")
      ->group(accelerators);
  app.add_option(
         "--min-busbw", options.min_busbw,
         "with --check: minimum all-reduce bus bandwidth in GB/s at the largest size [default: 100 for "
         "NVLink-class GPUs, else 5]")
      ->type_name("GBPS")
      ->check(CLI::Range(0.0, 1e6).description(""))
      ->group(accelerators);
  app.add_flag("--list-envs", options.list_envs, "list the cached Python environments and exit")
      ->group(environment);
  app.add_flag(
         "--prune-envs", options.prune_envs,
         "remove cached Python environments (not in use; with --older-than, only those unused that long)")
      ->group(environment);
  app.add_option("--older-than", options.older_than, "with --prune-envs: a duration like 30d, 12h or 90m")
      ->type_name("DURATION")
      ->group(environment);

  // Help is re-added here so that "Other" lists it first, then the version and the deprecated flags.
  app.set_help_flag();
  app.set_help_flag("-h,--help", "print this help and exit")->group(std::string(k_group_other));
  app.add_flag("--version", options.version, "print the version and exit")->group(std::string(k_group_other));
  for (const auto& legacy : k_legacy_flags) {
    auto& slot = options.slots.emplace_back();
    slot.key = nullptr;
    slot.spelling = std::string(legacy.flag);
    auto* opt = app.add_option(std::string(legacy.flag), slot.texts, std::string(legacy.doc));
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->expected(1)->allow_extra_args(false);
    opt->type_name("VALUE")->group(std::string(k_group_other));
  }

  // Hidden (empty group): generated documents that keep docs and shells in step with the key table.
  app.add_flag("--print-spec-table", options.print_spec_table, "print the spec key table as Markdown")
      ->group("");
  app.add_flag("--print-man", options.print_man, "print the air-run(1) man page (roff)")->group("");
  app.add_option("--print-completion", options.print_completion,
                 "print the completion script for bash or zsh")
      ->group(""); // another shell: cli/docs.hpp check_completion_shell
  app.formatter(std::make_shared<HelpFormatter>());
}

Expected<ResolvedSpec> resolve_cli_spec(const CliOptions& options, const Environment& env) {
  SpecInputs inputs;
  inputs.environment = env;
  inputs.flags = options.flag_values();
  inputs.command = options.command;
  if (auto python = installed_python(options.program, env)) {
    inputs.default_python = python->path;
    inputs.default_python_why = python->why;
  }
  if (!options.spec_file.empty()) {
    // `-f -`: the spec comes from standard input; its paths are relative to the working directory.
    const bool from_stdin = options.spec_file == "-";
    auto text =
        from_stdin ? read_standard_input("spec file") : read_text_file(options.spec_file, "spec file");
    if (!text) return text.error();
    inputs.file_text = std::move(*text);
    inputs.file_path = from_stdin ? std::string(k_stdin_spec_name) : options.spec_file;
  }
  return resolve_spec(inputs);
}

std::vector<std::tuple<std::string, std::string, std::string>> CliOptions::flag_values() const {
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (const auto& slot : slots) {
    const std::string key =
        slot.key ? std::string(slot.key->key) : (slot.spelling == "--gpus" ? "gpus" : "gpu_type");
    if (!slot.text_when_set.empty()) {
      if (slot.count > 0) out.emplace_back(key, slot.text_when_set, slot.spelling);
      continue;
    }
    if (slot.key && slot.key->type == ValueType::boolean) {
      if (slot.count > 0) out.emplace_back(key, "true", slot.spelling);
      if (slot.count < 0) out.emplace_back(key, "false", slot.spelling); // --flag=false (CLI11 counts -1)
      continue;
    }
    for (const auto& text : slot.texts) out.emplace_back(key, text, slot.spelling);
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> CliOptions::conflict() const {
  for (const auto& slot : slots) {
    if (slot.text_when_set.empty() || slot.count <= 0) continue;
    for (const auto& other : slots) {
      if (other.key == slot.key && other.text_when_set.empty() && !other.texts.empty())
        return std::make_pair(other.spelling, slot.spelling);
    }
  }
  return std::nullopt;
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
