#pragma once

// The pieces resolve_spec (core/spec/resolve.cpp) is made of, one file each:
// every source (the YAML file, AIR_RUN_* variables, flags) becomes a list of
// typed assignments, which are applied in precedence order and then checked
// across keys. Only core/spec/ includes this header.

#include "core/spec/spec.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace air::resolve_parts {

/// A dependencies value that is the path of a requirements file.
struct RequirementsPath {
  std::string path;
};

/// One parsed value of any key's type.
using Value =
    std::variant<std::string, std::int64_t, bool, Millis, std::optional<Millis>, std::vector<std::string>,
                 std::map<std::string, std::string>, std::vector<int>, RequirementsPath>;

/// One typed value for one key, from one place.
struct Assignment {
  const SpecKey* key = nullptr;
  Value value;
  Origin origin;
};

/// Which source a text came from: each spells booleans, lists and maps its own way.
enum class Source { file, env, flag };

/// The start of every warning line; warnings are whole lines the CLI prints as they are.
inline constexpr const char k_warning[] = "air-run: warning: ";

// ---- key names (resolve.cpp) -------------------------------------------------

/// The legacy row named `name`; nullptr when it is none.
const LegacyKey* find_legacy(std::string_view name);

/// A YAML-only alternative spelling that is not deprecated ("env_variables"); nullptr otherwise.
const SpecKey* find_alias(std::string_view name);

/// The long flag of a key ("--no-python"), or the key itself when it has none.
std::string long_flag(std::string_view key);

/// The message prefix for a value with this origin: "job.yaml:6:1: no_python",
/// "environment variable AIR_RUN_X", "--no-python".
std::string place_of(const Origin& origin, std::string_view key);

// ---- values (resolve_values.cpp) ---------------------------------------------

/// Parses one textual value (a YAML scalar, a variable, a flag argument) as
/// `key`'s type. Errors (usage) start with `prefix`; deprecations are added to `warnings`.
Expected<Value> parse_text(const SpecKey& key, std::string_view text, Source source,
                           const std::string& prefix, std::vector<std::string>& warnings);

/// Whether `name` may be a key of the map `key`: variable names for `env`,
/// MLflow tag names for `mlflow.tags`.
bool is_map_key(const SpecKey& key, std::string_view name);

/// What a key of the map `key` is called in messages: "variable" or "tag".
std::string map_key_what(const SpecKey& key);

// ---- sources (resolve_file.cpp, resolve_env.cpp, resolve_flags.cpp) -----------

/// The spec file's assignments, each with its file:line:col. `file` names it in messages.
Status read_spec_file(const std::string& text, const std::string& file, std::vector<std::string>& warnings,
                      std::vector<Assignment>& out);

/// The AIR_RUN_* variables' assignments; an AIR_RUN_* name air-run does not read gets a warning.
Status read_environment(const Environment& environment, std::vector<std::string>& warnings,
                        std::vector<Assignment>& out);

/// The flags' assignments in command-line order, then the trailing command.
Status read_flags(const SpecInputs& inputs, std::vector<std::string>& warnings, std::vector<Assignment>& out);

// ---- merging and checks (resolve_apply.cpp, resolve_settle.cpp) ----------------

/// Applies one source's assignments over `spec`: a key set again by the same
/// source appends to a list (repeated flags), any other replaces the value.
void apply_all(LaunchSpec& spec, const std::vector<Assignment>& assignments);

/// The checks and defaults across keys once every source is applied: module
/// against no_python, torchrun's values, preload's module names, defaults
/// that depend on how air-run was started, and the rendezvous.
Status settle_spec(LaunchSpec& spec, const SpecInputs& inputs);

} // namespace air::resolve_parts
