// Flags to assignments, in command-line order: a legacy flag gets a warning
// once, and a key given under both its names is an error.
#include "core/spec/resolve_parts.hpp"

#include <map>
#include <set>

namespace air::resolve_parts {

Status read_flags(const SpecInputs& inputs, std::vector<std::string>& warnings,
                  std::vector<Assignment>& out) {
  std::map<std::string_view, std::string> given; // table key -> spelling used first
  std::set<std::string> warned;
  for (const auto& [key, text, spelling] : inputs.flags) {
    const SpecKey* row = find_spec_key(key);
    const LegacyKey* legacy = row == nullptr ? find_legacy(key) : nullptr;
    if (legacy != nullptr) {
      row = find_spec_key(legacy->replaced);
      if (warned.insert(spelling).second) {
        warnings.push_back(k_warning + single_quoted(spelling) + " is deprecated, use " +
                           single_quoted(long_flag(legacy->replaced)));
      }
    }
    if (row == nullptr) return usage_error(spelling + ": unknown spec key " + single_quoted(key));
    const auto [first, inserted] = given.emplace(row->key, key);
    if (!inserted && first->second != key) {
      // One of the two names is the legacy one: this flag or the earlier flag.
      const LegacyKey* earlier = find_legacy(first->second);
      const std::string legacy_flag =
          legacy != nullptr ? "--" + std::string(legacy->flag)
                            : (earlier != nullptr ? "--" + std::string(earlier->flag) : first->second);
      const std::string other_flag = legacy != nullptr ? long_flag(row->key) : legacy_flag;
      return usage_error(spelling + ": also given as " + single_quoted(other_flag) +
                         "; remove the deprecated " + single_quoted(legacy_flag));
    }
    auto value = parse_text(*row, text, Source::flag, spelling, warnings);
    if (!value) return value.error();
    out.push_back(Assignment{row, std::move(*value), Origin{Origin::Kind::flag, spelling}});
  }
  if (!inputs.command.empty()) {
    out.push_back(
        Assignment{find_spec_key("command"), Value(inputs.command), Origin{Origin::Kind::flag, ""}});
  }
  return ok_status();
}

} // namespace air::resolve_parts
