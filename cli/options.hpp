#pragma once

#include "core/spec/spec.hpp"
#include "core/spec/torchrun.hpp"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace air::cli {

/// Everything the command line said, as raw strings: the spec module types and
/// validates them, so flags, AIR_RUN_* variables and YAML share one set of rules.
struct CliOptions {
  std::string spec_file;
  bool dry_run = false;
  bool list_gpus = false;
  bool version = false;
  bool torch_distributor = false;
  bool list_envs = false;        ///< --list-envs
  bool prune_envs = false;       ///< --prune-envs
  std::string older_than;        ///< --older-than, for --prune-envs
  bool print_spec_table = false; ///< hidden: the docs/spec.md key table, generated from the key table
  bool print_man = false;        ///< hidden: the man page, generated from the options
  std::string print_completion;  ///< hidden: "bash" or "zsh", the completion script
  bool check = false;            ///< --check: the preflight health and NCCL check
  double min_busbw = -1;         ///< --min-busbw GB/s; < 0: the default for the GPUs

  /// One slot per spec key with a flag; CLI11 writes the texts it saw there.
  struct KeySlot {
    const SpecKey* key = nullptr;
    std::string spelling; ///< "--timeout"
    std::vector<std::string> texts;
    std::int64_t count = 0; ///< for boolean flags
    /// A switch that gives its key this text (`--no-preload`: "none"); "" for the key's own flag.
    std::string text_when_set;
  };
  std::deque<KeySlot> slots;        ///< deque: CLI11 keeps pointers into it
  std::vector<std::string> command; ///< TARGET ARGS...
  std::string program; ///< argv[0]: where air-run was started from (core/os/installed_python.hpp)

  /// The key's own flag and its switch (text_when_set), as ("--preload",
  /// "--no-preload"), when both were given; nullopt otherwise.
  std::optional<std::pair<std::string, std::string>> conflict() const;

  /// The flag values in the shape resolve_spec takes.
  std::vector<std::tuple<std::string, std::string, std::string>> flag_values() const;
};

/// Resolves the spec from the command line, AIR_RUN_* variables and the -f file
/// (read here). Shared by every command that needs the spec.
Expected<ResolvedSpec> resolve_cli_spec(const CliOptions& options, const Environment& env);

/// The option names a command line uses (long names without dashes, short
/// letters), up to a `--`; `all` when it asks for the help or a generated
/// document, which list every option. Pure.
struct UsedOptions {
  bool all = false;
  std::set<std::string> names;
};
UsedOptions used_options(const std::vector<std::string>& args);

/// Registers with CLI11 the options `used` names (every one with `all`):
/// air-run's own flags and one flag per spec key (from the key table), each
/// under its `--help` heading, and installs the help layout (cli/help.hpp).
/// Options the line does not use are left out: CLI11's registration of all
/// of them cost 0.4-0.8 ms of every launch. Give it the line after
/// normalize_launcher_args, whose spellings it matches exactly.
void register_options(CLI::App& app, CliOptions& options, const UsedOptions& used);

/// Every long flag of air-run, with its short letter and whether it takes a
/// value, in --help's order: what torchrun-style spellings, prefixes and
/// typos resolve against. Taken from the same walk that registers them, so
/// the two never differ; CLI11 is not involved.
std::vector<KnownFlag> known_flags();

} // namespace air::cli
