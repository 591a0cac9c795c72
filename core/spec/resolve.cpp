// resolve_spec: YAML file, AIR_RUN_* variables and flags become one LaunchSpec.
// Each source is first turned into a list of typed assignments (parsing and
// validation happen there, so every error knows its place), then the lists
// are applied in precedence order: file, env, flags. The pieces are in
// core/spec/resolve_parts.hpp, one file each.
#include "core/spec/resolve_parts.hpp"

namespace air {
namespace resolve_parts {

const LegacyKey* find_legacy(std::string_view name) {
  for (const LegacyKey& legacy : legacy_keys()) {
    if (legacy.name == name) return &legacy;
  }
  return nullptr;
}

const SpecKey* find_alias(std::string_view name) {
  if (name == "env_variables") return find_spec_key("env");
  return nullptr;
}

std::string long_flag(std::string_view key) {
  const SpecKey* row = find_spec_key(key);
  return row == nullptr || row->flag.empty() ? std::string(key) : "--" + std::string(row->flag);
}

std::string place_of(const Origin& origin, std::string_view key) {
  switch (origin.kind) {
  case Origin::Kind::file:
    return origin.where + ": " + std::string(key);
  case Origin::Kind::env:
    return "environment variable " + origin.where;
  case Origin::Kind::flag:
    return origin.where.empty() ? std::string(key) : origin.where;
  case Origin::Kind::default_value:
    break;
  }
  return std::string(key);
}

} // namespace resolve_parts

Expected<ResolvedSpec> resolve_spec(const SpecInputs& inputs) {
  using namespace resolve_parts;
  ResolvedSpec resolved;
  std::vector<Assignment> from_file;
  std::vector<Assignment> from_env;
  std::vector<Assignment> from_flags;
  if (inputs.file_text) {
    const std::string file = inputs.file_path.empty() ? "<spec>" : inputs.file_path;
    AIR_TRY(read_spec_file(*inputs.file_text, file, resolved.warnings, from_file));
    resolved.spec.spec_path = inputs.file_path;
  }
  AIR_TRY(read_environment(inputs.environment, resolved.warnings, from_env));
  AIR_TRY(read_flags(inputs, resolved.warnings, from_flags));

  LaunchSpec& spec = resolved.spec;
  apply_all(spec, from_file);
  apply_all(spec, from_env);
  apply_all(spec, from_flags);
  AIR_TRY(settle_spec(spec, inputs));
  return resolved;
}

} // namespace air
