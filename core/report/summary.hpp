#pragma once

#include "core/report/collect.hpp"
#include "core/spec/spec.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace air {

/// Version of the summary document's shape ("schema_version"). Bumped only
/// for incompatible changes; adding a field does not bump it. Documented in
/// docs/summary-schema.md and docs/summary.schema.json.
inline constexpr int k_summary_schema_version = 1;

/// The spec as resolved, one entry per key:
/// {"timeout": {"value": 10800, "origin": "default", "where": null}, ...}.
/// Durations are in seconds; values of `env` whose name looks secret
/// (TOKEN, SECRET, PASSWORD, KEY, CREDENTIAL, AUTH) are replaced by "<redacted>".
nlohmann::ordered_json spec_settings_json(const LaunchSpec& spec);

/// Whether an environment variable's value is redacted in the summary.
bool looks_secret(std::string_view name);

/// The JSON summary document (docs/summary-schema.md).
/// Pure: everything comes from the report.
nlohmann::ordered_json summary_json(const RunReport& report);

/// The summary as text: two-space indented JSON plus a newline. Invalid UTF-8
/// in rank output is replaced by U+FFFD, so this never throws.
std::string summary_text(const RunReport& report);

} // namespace air
