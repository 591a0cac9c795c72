// AIR_RUN_* variables to assignments: one variable a key (and one a legacy
// name), each value parsed as the variables spell it (lists comma separated).
#include "core/base/suggest.hpp"
#include "core/spec/resolve_parts.hpp"

#include <algorithm>

namespace air::resolve_parts {
namespace {

// AIR_RUN_* variables that are not spec keys: set by air-run for its ranks,
// read by its tools and tests. Any other AIR_RUN_* name is most likely a typo.
constexpr std::string_view k_other_variables[] = {
    "AIR_RUN_ID",
    "AIR_RUN_DIR",
    "AIR_RUN_BINARY",
    "AIR_RUN_FAKE_GPUS",
    "AIR_RUN_CGROUP",
    "AIR_RUN_SPAWN",
    "AIR_RUN_JOIN_TOKEN",
    "AIR_RUN_JOIN_TOKEN_FILE",
    "AIR_RUN_MLFLOW_RUN_FILE",
    "AIR_RUN_MLFLOW_RUN_WAIT",
    "AIR_RUN_NCCL_CHECK",
    "AIR_RUN_NCCL_CHECK_TIMEOUT",
    "AIR_RUN_PHASES",
    "AIR_RUN_STACK_FILE",
    "AIR_RUN_STACK_SIGNAL",
    "AIR_RUN_TARGET_MODULES",
    "AIR_RUN_WHEEL_BINARY",
    "AIR_RUN_WHEEL_BUILD_DIR",
    "AIR_RUN_WHEEL_PLATFORM",
};

// An AIR_RUN_* variable air-run does not read is ignored, like an unknown key
// would be refused: say so, with the closest name ("AIR_RUN_TIMOUT").
void warn_unknown_variables(const Environment& environment, std::vector<std::string>& warnings) {
  std::vector<std::string> known;
  for (const SpecKey& row : spec_keys()) {
    if (!row.env.empty()) known.emplace_back(row.env);
  }
  for (const LegacyKey& legacy : legacy_keys()) known.emplace_back(legacy.env);
  for (const std::string_view name : k_other_variables) known.emplace_back(name);
  for (const auto& [name, value] : environment) {
    if (name.rfind("AIR_RUN_", 0) != 0 || std::find(known.begin(), known.end(), name) != known.end())
      continue;
    const std::string hint = closest_name(name, known);
    warnings.push_back(k_warning + std::string("environment variable ") + name + " is not one air-run reads" +
                       (hint.empty() ? "" : " (did you mean " + hint + "?)") + "; it is ignored");
  }
}

} // namespace

Status read_environment(const Environment& environment, std::vector<std::string>& warnings,
                        std::vector<Assignment>& out) {
  for (const SpecKey& row : spec_keys()) {
    if (row.env.empty()) continue;
    const auto it = environment.find(std::string(row.env));
    if (it == environment.end()) continue;
    const std::string prefix = "environment variable " + std::string(row.env);
    auto value = parse_text(row, it->second, Source::env, prefix, warnings);
    if (!value) return value.error();
    out.push_back(Assignment{&row, std::move(*value), Origin{Origin::Kind::env, std::string(row.env)}});
  }
  for (const LegacyKey& legacy : legacy_keys()) {
    const auto it = environment.find(std::string(legacy.env));
    if (it == environment.end()) continue;
    const SpecKey* row = find_spec_key(legacy.replaced);
    const std::string prefix = "environment variable " + std::string(legacy.env);
    if (environment.count(std::string(row->env)) != 0) {
      return usage_error(prefix + ": also given as " + std::string(row->env) + "; remove the deprecated " +
                         std::string(legacy.env));
    }
    warnings.push_back(k_warning + prefix + " is deprecated, use " + std::string(row->env));
    auto value = parse_text(*row, it->second, Source::env, prefix, warnings);
    if (!value) return value.error();
    out.push_back(Assignment{row, std::move(*value), Origin{Origin::Kind::env, std::string(legacy.env)}});
  }
  warn_unknown_variables(environment, warnings);
  return ok_status();
}

} // namespace air::resolve_parts
