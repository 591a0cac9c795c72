// Text to typed values: one YAML scalar, AIR_RUN_* variable or flag argument
// becomes the value of its key's type, or an error that starts with its place.
#include "core/spec/accelerator_type.hpp"
#include "core/spec/resolve_parts.hpp"
#include "core/spec/torchrun.hpp"
#include "core/spec/torchrun_values.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace air::resolve_parts {
namespace {

bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }

// Lexical check only: whether the machine has these accelerators is the
// hardware module's question.
Expected<std::string> normalise_accelerator_type(std::string_view text, const std::string& prefix,
                                                 std::vector<std::string>& warnings) {
  auto type = parse_accelerator_type(text);
  if (!type) return usage_error(prefix + ": " + type.error().message);
  if (type->legacy) {
    warnings.push_back(k_warning + prefix + ": " + single_quoted(text) + " is deprecated, use 'GPU_<n>x" +
                       type->model + "'");
  }
  return type->canonical();
}

Expected<std::string> check_string(const SpecKey& key, std::string_view text, const std::string& prefix,
                                   std::vector<std::string>& warnings) {
  if (key.key == "accelerator_type") return normalise_accelerator_type(text, prefix, warnings);
  if ((key.key == "environment.python" || key.key == "master_addr") && text.empty()) {
    return usage_error(prefix + ": must not be empty");
  }
  if (key.key == "run_id") {
    // The run id names directories and files, so keep it path-safe.
    const bool safe = std::all_of(text.begin(), text.end(), [](char c) {
      return is_upper(c) || (c >= 'a' && c <= 'z') || is_digit(c) || c == '.' || c == '_' || c == '-';
    });
    if (!safe || text == "." || text == "..") {
      return usage_error(prefix + ": may contain only letters, digits, '.', '_' and '-', got " +
                         single_quoted(text));
    }
  }
  return std::string(text);
}

Expected<std::int64_t> parse_integer(const SpecKey& key, std::string_view text, const std::string& prefix) {
  std::string_view digits = text;
  const bool negative = !digits.empty() && digits.front() == '-';
  if (negative) digits.remove_prefix(1);
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_digit)) {
    return usage_error(prefix + ": expected a whole number, got " + single_quoted(text));
  }
  std::int64_t value = 0;
  bool huge = false;
  for (char c : digits) {
    if (value > 100'000'000'000) {
      huge = true;
      break;
    }
    value = value * 10 + (c - '0');
  }
  if (negative) value = -value;
  if (huge || value < key.min_value || value > key.max_value) {
    if (key.max_value == std::numeric_limits<std::int32_t>::max()) {
      return usage_error(prefix + ": must be at least " + std::to_string(key.min_value) + ", got " +
                         std::string(text));
    }
    return usage_error(prefix + ": must be between " + std::to_string(key.min_value) + " and " +
                       std::to_string(key.max_value) + ", got " + std::string(text));
  }
  return value;
}

// YAML is strict (true/false); flags and variables also take 1/0 and yes/no,
// as shell users write them. A bare flag arrives as "".
Expected<bool> parse_bool(std::string_view text, Source source, const std::string& prefix) {
  if (source == Source::file) {
    if (text == "true" || text == "True") return true;
    if (text == "false" || text == "False") return false;
    return usage_error(prefix + ": expected true or false, got " + single_quoted(text));
  }
  const std::string word = lower(text);
  if (word == "true" || word == "1" || word == "yes" || (source == Source::flag && text.empty())) return true;
  if (word == "false" || word == "0" || word == "no") return false;
  return usage_error(prefix + ": expected true or false (or 1/0, yes/no), got " + single_quoted(text));
}

bool is_variable_name(std::string_view name) {
  if (name.empty() || is_digit(name.front())) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return is_upper(c) || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_'; });
}

// MLflow's rule for tag names: letters, digits, '_', '-', '.', ' ' and '/', at most 250.
bool is_tag_name(std::string_view name) {
  if (name.empty() || name.size() > 250) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return is_upper(c) || (c >= 'a' && c <= 'z') || is_digit(c) || c == '_' || c == '-' || c == '.' ||
           c == ' ' || c == '/';
  });
}

} // namespace

bool is_map_key(const SpecKey& key, std::string_view name) {
  return key.key == "mlflow.tags" ? is_tag_name(name) : is_variable_name(name);
}
std::string map_key_what(const SpecKey& key) { return key.key == "mlflow.tags" ? "tag" : "variable"; }

namespace {

Expected<std::pair<std::string, std::string>> parse_assignment(const SpecKey& key, std::string_view text,
                                                               const std::string& prefix) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos)
    return usage_error(prefix + ": expected KEY=VALUE, got " + single_quoted(text));
  const std::string_view name = text.substr(0, eq);
  if (!is_map_key(key, name))
    return usage_error(prefix + ": invalid " + map_key_what(key) + " name " + single_quoted(name));
  return std::pair(std::string(name), std::string(text.substr(eq + 1)));
}

// torchrun's N or MIN:MAX, kept as {MIN, MAX}.
Expected<std::vector<int>> parse_node_range(const SpecKey& key, std::string_view text,
                                            const std::string& prefix) {
  const std::size_t colon = text.find(':');
  auto lo = parse_integer(key, text.substr(0, colon), prefix);
  if (!lo) return lo.error();
  auto hi = colon == std::string_view::npos ? lo : parse_integer(key, text.substr(colon + 1), prefix);
  if (!hi) return hi.error();
  if (*lo > *hi) {
    return usage_error(prefix + ": MIN must not exceed MAX in MIN:MAX, got " + single_quoted(text));
  }
  return std::vector<int>{static_cast<int>(*lo), static_cast<int>(*hi)};
}

} // namespace

Expected<Value> parse_text(const SpecKey& key, std::string_view text, Source source,
                           const std::string& prefix, std::vector<std::string>& warnings) {
  if (key.key == "nnodes") {
    auto range = parse_node_range(key, text, prefix);
    if (!range) return range.error();
    return Value(std::move(*range));
  }
  switch (key.type) {
  case ValueType::string: {
    auto s = check_string(key, text, prefix, warnings);
    if (!s) return s.error();
    return Expected<Value>(std::in_place, std::move(*s)); // in place: see the string lists below
  }
  case ValueType::integer: {
    auto n = parse_integer(key, text, prefix);
    if (!n) return n.error();
    return Value(*n);
  }
  case ValueType::boolean: {
    auto b = parse_bool(text, source, prefix);
    if (!b) return b.error();
    return Value(*b);
  }
  case ValueType::duration: {
    auto d = parse_duration(text, prefix);
    if (!d) return d.error();
    return Value(*d);
  }
  case ValueType::opt_duration: {
    auto d = parse_opt_duration(text, prefix);
    if (!d) return d.error();
    if (*d && d->value().count() <= 0) {
      return usage_error(prefix + ": must be greater than zero (use none for no limit), got " +
                         single_quoted(text));
    }
    return Value(*d);
  }
  case ValueType::string_list: {
    // Made in place (g++ 14 at -O2 warned -Wfree-nonheap-object on the
    // temporary variant's destruction).
    if (source == Source::flag)
      return Expected<Value>(std::in_place, std::vector<std::string>{std::string(text)});
    if (key.key == "environment.dependencies")
      return Expected<Value>(std::in_place, RequirementsPath{std::string(text)});
    auto words = split_command_line(text, prefix);
    if (!words) return words.error();
    return Value(std::move(*words));
  }
  case ValueType::string_map: {
    // A variable holds several comma-separated pairs; a flag holds one.
    std::map<std::string, std::string> pairs;
    std::size_t from = 0;
    for (;;) {
      const std::size_t comma = source == Source::env ? text.find(',', from) : std::string_view::npos;
      auto kv = parse_assignment(key, text.substr(from, comma - from), prefix);
      if (!kv) return kv.error();
      pairs[kv->first] = kv->second;
      if (comma == std::string_view::npos) break;
      from = comma + 1;
    }
    return Value(std::move(pairs));
  }
  case ValueType::rank_list: {
    auto ranks = parse_rank_list(text, prefix);
    if (!ranks) return ranks.error();
    return Value(std::move(*ranks));
  }
  }
  return usage_error(prefix + ": unsupported value type");
}

} // namespace air::resolve_parts
