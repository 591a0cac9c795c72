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

/// CLI11 checks each option it is given against all it has (about 130):
/// 0.4-0.8 ms of every launch for options the line never uses. One walk
/// over air-run's options, in --help's order, serves two purposes: it notes
/// every option's names (what torchrun spellings, prefixes and typos resolve
/// against, no CLI11 needed), and it registers with CLI11 only the options
/// `used` wants: all of them for --help and the generated documents. The
/// names are written once, here, for both.
class OptionWalk {
public:
  OptionWalk(CLI::App* app, const UsedOptions* used, std::vector<KnownFlag>* known)
      : app_(app), used_(used), known_(known) {}

  /// A switch: registered (returned) when wanted, else nullptr.
  template <class T> CLI::Option* flag(const std::string& names, T& target, const std::string& help) {
    return take(names, false) ? app_->add_flag(names, target, help) : nullptr;
  }
  /// An option with a value: registered (returned) when wanted, else nullptr.
  template <class T> CLI::Option* option(const std::string& names, T& target, const std::string& help) {
    return take(names, true) ? app_->add_option(names, target, help) : nullptr;
  }
  /// Notes `names` (CLI11 spelling: "-n,--num-accelerators", "!--no-live");
  /// true when they are to be registered.
  bool take(const std::string& names, bool takes_value) {
    std::vector<std::string> longs;
    std::string short_name;
    bool wanted = used_ != nullptr && used_->all;
    for (std::string_view name : split_view(names, ',')) {
      if (!name.empty() && name.front() == '!') name.remove_prefix(1); // a flag's negation
      if (name.substr(0, 2) == "--") {
        longs.emplace_back(name.substr(2));
        wanted = wanted || (used_ != nullptr && used_->names.count(longs.back()) > 0);
      } else if (name.size() == 2 && name.front() == '-') {
        if (short_name.empty()) short_name = std::string(name.substr(1));
        wanted = wanted || (used_ != nullptr && used_->names.count(std::string(name.substr(1))) > 0);
      }
    }
    if (known_ != nullptr) {
      for (auto& name : longs) known_->push_back({std::move(name), short_name, takes_value});
    }
    return app_ != nullptr && wanted;
  }
  CLI::App* app() const { return app_; }

private:
  static std::vector<std::string_view> split_view(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    for (std::size_t at = 0;;) {
      const auto next = text.find(separator, at);
      parts.push_back(text.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
      if (next == std::string_view::npos) return parts;
      at = next + 1;
    }
  }

  CLI::App* app_;
  const UsedOptions* used_;
  std::vector<KnownFlag>* known_;
};

/// One key's flag: a switch for booleans, else one value per occurrence;
/// repeats accumulate (--env A=1 --env B=2) and the value never swallows the
/// TARGET that follows it. nullptr when the walk does not register it.
CLI::Option* add_key_option(OptionWalk& walk, CliOptions& options, const SpecKey& key) {
  const std::string names = names_for(key);
  if (!walk.take(names, key.type != ValueType::boolean)) return nullptr;
  const std::string help = help_for(key);
  CLI::App& app = *walk.app();
  auto& slot = options.slots.emplace_back();
  slot.key = &key;
  slot.spelling = first_long_name(names);
  if (key.type == ValueType::boolean) return app.add_flag(names, slot.count, help);
  auto* opt = app.add_option(names, slot.texts, help);
  opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->expected(1)->allow_extra_args(false);
  return opt->type_name(std::string(key.value_name));
}

/// Every option of air-run, in --help's order, through `walk`.
void walk_options(OptionWalk& walk, CliOptions& options) {
  namespace G = key_group;
  const std::string launch(G::launch), accelerators(G::accelerators), environment(G::environment);
  if (auto* o = walk.option("-f,--spec", options.spec_file,
                            "YAML spec file, - for standard input (examples in configs/)"))
    o->type_name("FILE")->group(launch);
  if (auto* o =
          walk.flag("--dry-run", options.dry_run,
                    "print the resolved spec with each value's origin and the per-rank plan; launch nothing"))
    o->group(launch);
  for (const auto& key : spec_keys()) {
    if (key.flag.empty()) continue;
    if (auto* o = add_key_option(walk, options, key)) o->group(std::string(key.group));
    if (key.key != "preload") continue;
    // --no-preload is `--preload none` as a switch (CLI11 negates flags only).
    // Not CLI11's excludes(): a counting flag holds a forced default ("0"),
    // which CLI11 2.4's excludes() counts as given, so `--preload torch` alone
    // was refused there (CliOptions::conflict checks the pair instead).
    if (!walk.take("--no-preload", false)) continue;
    auto& off = options.slots.emplace_back();
    off.key = &key;
    off.spelling = "--no-preload";
    off.text_when_set = "none";
    walk.app()
        ->add_flag("--no-preload", off.count, "no warm start: every rank starts a fresh interpreter")
        ->group(std::string(key.group));
  }
  // air-run's own commands follow the keys of their heading.
  if (auto* o = walk.flag(
          "--torch-distributor", options.torch_distributor,
          "run TARGET once as an unchanged TorchDistributor script (pyspark import provided by air)"))
    o->group(launch);
  if (auto* o = walk.flag("--list-gpus", options.list_gpus,
                          "print the detected GPUs (with --json as JSON) and exit"))
    o->group(accelerators);
  if (auto* o = walk.flag(
          "--check", options.check,
          "preflight: GPU health (NVML) and an NCCL all-reduce over the selected GPUs; exit 0 ok, 1 failed"))
    o->group(accelerators);
  if (auto* o = walk.option(
          "--min-busbw", options.min_busbw,
          "with --check: minimum all-reduce bus bandwidth in GB/s at the largest size [default: 100 for "
          "NVLink-class GPUs, else 5]"))
    o->type_name("GBPS")->check(CLI::Range(0.0, 1e6).description(""))->group(accelerators);
  if (auto* o = walk.flag("--list-envs", options.list_envs, "list the cached Python environments and exit"))
    o->group(environment);
  if (auto* o = walk.flag(
          "--prune-envs", options.prune_envs,
          "remove cached Python environments (not in use; with --older-than, only those unused that long)"))
    o->group(environment);
  if (auto* o = walk.option("--older-than", options.older_than,
                            "with --prune-envs: a duration like 30d, 12h or 90m"))
    o->type_name("DURATION")->group(environment);

  // Help is re-added here so that "Other" lists it first, then the version
  // and the deprecated flags. Always registered: CLI11 has its own -h until
  // it is replaced.
  walk.take("-h,--help", false);
  if (walk.app() != nullptr) {
    walk.app()->set_help_flag();
    walk.app()->set_help_flag("-h,--help", "print this help and exit")->group(std::string(k_group_other));
  }
  if (auto* o = walk.flag("--version", options.version, "print the version and exit"))
    o->group(std::string(k_group_other));
  for (const auto& legacy : k_legacy_flags) {
    if (!walk.take(std::string(legacy.flag), true)) continue;
    auto& slot = options.slots.emplace_back();
    slot.key = nullptr;
    slot.spelling = std::string(legacy.flag);
    auto* opt = walk.app()->add_option(std::string(legacy.flag), slot.texts, std::string(legacy.doc));
    opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->expected(1)->allow_extra_args(false);
    opt->type_name("VALUE")->group(std::string(k_group_other));
  }

  // Hidden (empty group): generated documents that keep docs and shells in step with the key table.
  if (auto* o =
          walk.flag("--print-spec-table", options.print_spec_table, "print the spec key table as Markdown"))
    o->group("");
  if (auto* o = walk.flag("--print-man", options.print_man, "print the air-run(1) man page (roff)"))
    o->group("");
  if (auto* o = walk.option("--print-completion", options.print_completion,
                            "print the completion script for bash or zsh"))
    o->group(""); // another shell: cli/docs.hpp check_completion_shell
}

} // namespace

UsedOptions used_options(const std::vector<std::string>& args) {
  UsedOptions used;
  for (const auto& arg : args) {
    if (arg == "--") break; // the TARGET follows
    if (arg.size() < 2 || arg[0] != '-') continue;
    if (arg[1] == '-') {
      used.names.insert(arg.substr(2, arg.find('=') - 2));
    } else {
      // -n8, -vq: any letter may be a short option.
      for (std::size_t i = 1; i < arg.size(); ++i) used.names.insert(std::string(1, arg[i]));
    }
  }
  // The help and the generated documents list every option.
  for (const char* whole : {"h", "help", "print-spec-table", "print-man", "print-completion"}) {
    if (used.names.count(whole) > 0) used.all = true;
  }
  return used;
}

void register_options(CLI::App& app, CliOptions& options, const UsedOptions& used) {
  OptionWalk walk(&app, &used, nullptr);
  walk_options(walk, options);
  app.formatter(std::make_shared<HelpFormatter>());
}

std::vector<KnownFlag> known_flags() {
  std::vector<KnownFlag> known;
  CliOptions scratch;
  OptionWalk walk(nullptr, nullptr, &known);
  walk_options(walk, scratch);
  return known;
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

} // namespace air::cli
