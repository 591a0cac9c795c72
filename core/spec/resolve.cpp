// resolve_spec: YAML file, AIR_RUN_* variables and flags become one LaunchSpec.
// Each source is first turned into a list of typed assignments (parsing and
// validation happen there, so every error knows its place), then the lists
// are applied in precedence order: file, env, flags.
#include "core/base/redact.hpp"
#include "core/base/suggest.hpp"
#include "core/spec/accelerator_type.hpp"
#include "core/spec/rendezvous.hpp"
#include "core/spec/spec.hpp"
#include "core/spec/torchrun.hpp"
#include "core/spec/torchrun_values.hpp"
#include "core/spec/yaml_syntax.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <variant>

namespace air {
namespace {

/// A dependencies value that is the path of a requirements file.
struct RequirementsPath {
  std::string path;
};

using Value =
    std::variant<std::string, std::int64_t, bool, Millis, std::optional<Millis>, std::vector<std::string>,
                 std::map<std::string, std::string>, std::vector<int>, RequirementsPath>;

/// One typed value for one key, from one place.
struct Assignment {
  const SpecKey* key = nullptr;
  Value value;
  Origin origin;
};

enum class Source { file, env, flag };

// Warnings are whole lines; the CLI prints them as they are.
constexpr const char k_warning[] = "air-run: warning: ";

bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }

const LegacyKey* find_legacy(std::string_view name) {
  for (const LegacyKey& legacy : legacy_keys()) {
    if (legacy.name == name) return &legacy;
  }
  return nullptr;
}

// YAML-only alternative spellings that are not deprecated.
const SpecKey* find_alias(std::string_view name) {
  if (name == "env_variables") return find_spec_key("env");
  return nullptr;
}

std::string long_flag(std::string_view key) {
  const SpecKey* row = find_spec_key(key);
  return row == nullptr || row->flag.empty() ? std::string(key) : "--" + std::string(row->flag);
}

// ---- scalar values --------------------------------------------------------

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

// The names a mapping key accepts: variable names for `env`, tag names for `mlflow.tags`.
bool is_map_key(const SpecKey& key, std::string_view name) {
  return key.key == "mlflow.tags" ? is_tag_name(name) : is_variable_name(name);
}
std::string map_key_what(const SpecKey& key) { return key.key == "mlflow.tags" ? "tag" : "variable"; }

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

/// Parses one textual value (a YAML scalar, a variable, a flag argument).
Expected<Value> parse_text(const SpecKey& key, std::string_view text, Source source,
                           const std::string& prefix, std::vector<std::string>& warnings) {
  if (key.key == "nnodes") {
    // torchrun's N or MIN:MAX, kept as {MIN, MAX}.
    const std::size_t colon = text.find(':');
    auto lo = parse_integer(key, text.substr(0, colon), prefix);
    if (!lo) return lo.error();
    auto hi = colon == std::string_view::npos ? lo : parse_integer(key, text.substr(colon + 1), prefix);
    if (!hi) return hi.error();
    if (*lo > *hi) {
      return usage_error(prefix + ": MIN must not exceed MAX in MIN:MAX, got " + single_quoted(text));
    }
    return Value(std::vector<int>{static_cast<int>(*lo), static_cast<int>(*hi)});
  }
  switch (key.type) {
  case ValueType::string: {
    auto s = check_string(key, text, prefix, warnings);
    if (!s) return s.error();
    return Value(std::move(*s));
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
    if (source == Source::flag) return Value(std::vector<std::string>{std::string(text)});
    if (key.key == "environment.dependencies") return Value(RequirementsPath{std::string(text)});
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

// ---- YAML ------------------------------------------------------------------

std::string mark_text(const std::string& file, const YAML::Mark& mark) {
  if (mark.line < 0 || mark.column < 0) return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

std::string kind_name(const YAML::Node& node) {
  switch (node.Type()) {
  case YAML::NodeType::Sequence:
    return "a list";
  case YAML::NodeType::Map:
    return "a mapping";
  case YAML::NodeType::Scalar:
    return single_quoted(node.Scalar());
  default:
    return "nothing";
  }
}

std::string expected_text(const SpecKey& key) {
  switch (key.type) {
  case ValueType::string:
    return "a string";
  case ValueType::integer:
    return "a whole number";
  case ValueType::boolean:
    return "true or false";
  case ValueType::duration:
    return "a duration like 30s, 90m or 3h";
  case ValueType::opt_duration:
    return "a duration like 90m, 3h or none";
  case ValueType::string_list:
    return key.key == "environment.dependencies" ? "a list of requirements or a file path"
                                                 : "a list of strings";
  case ValueType::string_map:
    return "a mapping of NAME: value";
  case ValueType::rank_list:
    return "ranks like 0,2-3 or a list of ranks";
  }
  return "a value";
}

// The closest known name, when it is close enough to be a typo; "" otherwise.
// A key given at the wrong level ("python" for "environment.python") counts as close.
std::string suggest_key(std::string_view unknown) {
  std::string best;
  std::size_t best_score = SIZE_MAX;
  const auto consider = [&](std::string_view candidate, std::string_view suggestion) {
    std::size_t score = edit_distance(unknown, candidate);
    const std::size_t dot = candidate.rfind('.');
    if (dot != std::string_view::npos)
      score = std::min(score, edit_distance(unknown, candidate.substr(dot + 1)) + 1);
    const std::size_t limit = std::max<std::size_t>(1, candidate.size() / 3);
    if (score <= limit && score < best_score) {
      best_score = score;
      best = std::string(suggestion);
    }
  };
  for (const SpecKey& row : spec_keys()) consider(row.key, row.key);
  consider("env_variables", "env_variables");
  consider("environment", "environment");
  for (const LegacyKey& legacy : legacy_keys()) consider(legacy.name, legacy.replaced);
  return best;
}

// Where a second YAML document starts, when the text holds more than one.
// Walks the event stream at most two documents far, so it always ends.
std::optional<YAML::Mark> second_document(const std::string& text) {
  struct FirstMark : YAML::EventHandler {
    std::optional<YAML::Mark> mark;
    void OnDocumentStart(const YAML::Mark& m) override {
      if (!mark) mark = m;
    }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
  };
  std::istringstream in(text);
  YAML::Parser parser(in);
  FirstMark first;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  FirstMark second;
  if (!parser.HandleNextDocument(second)) return std::nullopt;
  return second.mark.value_or(YAML::Mark());
}

class FileReader {
public:
  FileReader(std::string file, std::vector<std::string>& warnings, std::vector<Assignment>& out)
      : file_(std::move(file)), warnings_(warnings), out_(out) {}

  Status read(const std::string& text) {
    // yaml-cpp alone accepts some malformed text (an unclosed quote eats the
    // keys after it); the strict check refuses it first, with its place.
    AIR_TRY(check_yaml_syntax(text, file_));
    // One document, loaded with Load: yaml-cpp 0.7's LoadAll never ends on some
    // malformed input (a file holding just ",") and eats memory without limit.
    std::vector<YAML::Node> docs;
    try {
      YAML::Node first = YAML::Load(text);
      docs.push_back(first);
      if (const auto second = second_document(text)) {
        return usage_error(mark_text(file_, *second) +
                           ": expected one YAML document, found another (a '---' line or a stray token)");
      }
    } catch (const YAML::ParserException& e) {
      return usage_error(mark_text(file_, e.mark) + ": invalid YAML: " + e.msg);
    } catch (const YAML::Exception& e) {
      return usage_error(file_ + ": invalid YAML: " + e.what());
    }
    if (docs.empty() || docs[0].IsNull()) return ok_status(); // empty file: nothing set
    if (!docs[0].IsMap()) {
      return usage_error(mark_text(file_, docs[0].Mark()) +
                         ": expected a mapping of keys at the top level, got " + kind_name(docs[0]));
    }
    return read_map(docs[0], "");
  }

private:
  struct Given {
    std::string name;  // as written: "gpus", "num_accelerators"
    std::string where; // "job.yaml:3:1"
  };

  Status read_map(const YAML::Node& map, const std::string& parent) {
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node key_node = it->first;
      const YAML::Node value = it->second;
      const std::string where = mark_text(file_, key_node.Mark());
      if (!key_node.IsScalar())
        return usage_error(where + ": expected a key name, got " + kind_name(key_node));
      const std::string name = parent.empty() ? key_node.Scalar() : parent + "." + key_node.Scalar();
      if (auto first = seen_.find(name); first != seen_.end()) {
        return usage_error(where + ": " + name + ": duplicate key (first given at " + first->second + ")");
      }
      seen_.emplace(name, where);

      if (name == "environment" || name == "mlflow") { // the nested groups of keys
        if (value.IsNull()) continue;
        if (!value.IsMap()) {
          return usage_error(value_place(key_node, value) + ": " + name + ": expected a mapping, got " +
                             kind_name(value));
        }
        AIR_TRY(read_map(value, name));
        continue;
      }

      const SpecKey* row = find_spec_key(name);
      if (row == nullptr) row = find_alias(name);
      const LegacyKey* legacy = row == nullptr ? find_legacy(name) : nullptr;
      if (legacy != nullptr) {
        row = find_spec_key(legacy->replaced);
        warnings_.push_back(k_warning + where + ": " + single_quoted(legacy->name) + " is deprecated, use " +
                            single_quoted(legacy->replaced));
      }
      if (row == nullptr) {
        const std::string suggestion = suggest_key(name);
        return usage_error(where + ": unknown key " + single_quoted(name) +
                           (suggestion.empty() ? "" : " (did you mean " + single_quoted(suggestion) + "?)"));
      }
      if (auto other = given_.find(row->key); other != given_.end()) {
        const Given& g = other->second;
        const bool deprecated = legacy != nullptr || find_legacy(g.name) != nullptr;
        return usage_error(where + ": " + name + ": also given as " + single_quoted(g.name) + " at " +
                           g.where +
                           (deprecated ? "; remove the deprecated " + single_quoted(legacy ? name : g.name)
                                       : "; keep only one"));
      }
      given_.emplace(row->key, Given{name, where});

      auto parsed = read_value(*row, name, key_node, value);
      if (!parsed) return parsed.error();
      out_.push_back(Assignment{row, std::move(*parsed), Origin{Origin::Kind::file, where}});
    }
    return ok_status();
  }

  // Null values carry the mark of the following line; point at the key instead.
  std::string value_place(const YAML::Node& key_node, const YAML::Node& value) const {
    return mark_text(file_, value.IsNull() ? key_node.Mark() : value.Mark());
  }

  Expected<std::string> scalar_text(const SpecKey& row, const std::string& prefix, const YAML::Node& node) {
    if (!node.IsScalar())
      return usage_error(prefix + ": expected " + expected_text(row) + ", got " + kind_name(node));
    return node.Scalar();
  }

  Expected<Value> read_value(const SpecKey& row, const std::string& name, const YAML::Node& key_node,
                             const YAML::Node& value) {
    const std::string prefix = value_place(key_node, value) + ": " + name;
    const auto wrong_kind = [&] {
      return usage_error(prefix + ": expected " + expected_text(row) + ", got " + kind_name(value));
    };
    switch (row.type) {
    case ValueType::string_list:
      if (value.IsNull()) return Value(std::vector<std::string>());
      if (value.IsScalar()) return parse_text(row, value.Scalar(), Source::file, prefix, warnings_);
      if (value.IsSequence()) {
        std::vector<std::string> items;
        for (const YAML::Node& item : value) {
          const std::string item_prefix = mark_text(file_, item.Mark()) + ": " + name;
          auto text = scalar_text(row, item_prefix, item);
          if (!text) return text.error();
          items.push_back(std::move(*text));
        }
        return Value(std::move(items));
      }
      return wrong_kind();
    case ValueType::string_map:
      if (value.IsNull()) return Value(std::map<std::string, std::string>());
      if (value.IsMap()) {
        std::map<std::string, std::string> vars;
        for (auto it = value.begin(); it != value.end(); ++it) {
          const std::string var_where = mark_text(file_, it->first.Mark());
          if (!it->first.IsScalar() || !is_map_key(row, it->first.Scalar())) {
            return usage_error(var_where + ": " + name + ": invalid " + map_key_what(row) + " name " +
                               kind_name(it->first));
          }
          const std::string var = it->first.Scalar();
          if (vars.count(var) != 0)
            return usage_error(var_where + ": " + name + ": duplicate " + map_key_what(row) + " " +
                               single_quoted(var));
          const std::string item_prefix = value_place(it->first, it->second) + ": " + name + "." + var;
          if (!it->second.IsScalar()) {
            return usage_error(item_prefix + ": expected a string, got " + kind_name(it->second));
          }
          vars.emplace(var, it->second.Scalar());
        }
        return Value(std::move(vars));
      }
      return wrong_kind();
    case ValueType::rank_list:
      if (value.IsNull()) return Value(std::vector<int>());
      if (value.IsScalar()) return parse_text(row, value.Scalar(), Source::file, prefix, warnings_);
      if (value.IsSequence()) {
        std::set<int> ranks;
        for (const YAML::Node& item : value) {
          const std::string item_prefix = mark_text(file_, item.Mark()) + ": " + name;
          auto text = scalar_text(row, item_prefix, item);
          if (!text) return text.error();
          auto some = parse_rank_list(*text, item_prefix);
          if (!some) return some.error();
          ranks.insert(some->begin(), some->end());
        }
        return Value(std::vector<int>(ranks.begin(), ranks.end()));
      }
      return wrong_kind();
    default:
      if (!value.IsScalar()) return wrong_kind();
      return parse_text(row, value.Scalar(), Source::file, prefix, warnings_);
    }
  }

  std::string file_;
  std::vector<std::string>& warnings_;
  std::vector<Assignment>& out_;
  std::map<std::string, std::string> seen_; // full key -> where, for duplicates
  std::map<std::string_view, Given> given_; // table key -> spelling used, for legacy conflicts
};

// ---- variables and flags --------------------------------------------------

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
    "AIR_RUN_STACK_FILE",
    "AIR_RUN_STACK_SIGNAL",
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

// ---- applying ---------------------------------------------------------------

template <typename T> void put(Setting<T>& setting, T value, const Origin& origin) {
  setting.value = std::move(value);
  setting.origin = origin;
}

template <typename T>
void put_list(Setting<std::vector<T>>& setting, std::vector<T> value, const Origin& origin, bool append) {
  if (append) {
    setting.value.insert(setting.value.end(), value.begin(), value.end());
  } else {
    setting.value = std::move(value);
  }
  setting.origin = origin;
}

// `append` is true when the same source already set this key (repeated flags).
void apply(LaunchSpec& s, const Assignment& a, bool append) {
  const std::string_view k = a.key->key;
  const Value& v = a.value;
  const Origin& o = a.origin;
  const auto integer = [&v] { return static_cast<int>(std::get<std::int64_t>(v)); };
  if (k == "accelerator_type") return put(s.accelerator_type, std::get<std::string>(v), o);
  if (k == "num_accelerators") return put(s.num_accelerators, std::optional<int>(integer()), o);
  if (k == "cpu_ranks") return put(s.cpu_ranks, integer(), o);
  if (k == "timeout") return put(s.timeout, std::get<std::optional<Millis>>(v), o);
  if (k == "grace_period") return put(s.grace_period, std::get<Millis>(v), o);
  if (k == "hang_timeout") return put(s.hang_timeout, std::get<std::optional<Millis>>(v), o);
  if (k == "on_hang") return put(s.on_hang, std::get<std::string>(v), o);
  if (k == "environment.python") return put(s.python, std::get<std::string>(v), o);
  if (k == "environment.dependencies") {
    if (const auto* path = std::get_if<RequirementsPath>(&v)) {
      put(s.requirements_file, path->path, o);
      return put(s.dependencies, std::vector<std::string>(), o);
    }
    put(s.requirements_file, std::string(), o);
    return put_list(s.dependencies, std::get<std::vector<std::string>>(v), o, append);
  }
  if (k == "environment.find_links")
    return put_list(s.find_links, std::get<std::vector<std::string>>(v), o, append);
  if (k == "environment.index_url") return put(s.index_url, std::get<std::string>(v), o);
  if (k == "environment.no_index") return put(s.no_index, std::get<bool>(v), o);
  if (k == "environment.system_site_packages") return put(s.system_site_packages, std::get<bool>(v), o);
  if (k == "env_cache_dir") return put(s.env_cache_dir, std::get<std::string>(v), o);
  if (k == "rebuild_env") return put(s.rebuild_env, std::get<bool>(v), o);
  if (k == "env") {
    for (const auto& [name, value] : std::get<std::map<std::string, std::string>>(v))
      s.env.value[name] = value;
    s.env.origin = o;
    return;
  }
  if (k == "command") return put_list(s.command, std::get<std::vector<std::string>>(v), o, append);
  if (k == "module") return put(s.module, std::get<bool>(v), o);
  if (k == "no_python") return put(s.no_python, std::get<bool>(v), o);
  if (k == "master_addr") return put(s.master_addr, std::get<std::string>(v), o);
  if (k == "master_port") return put(s.master_port, integer(), o);
  if (k == "nnodes") {
    const auto& range = std::get<std::vector<int>>(v);
    put(s.nnodes_min, range.front(), o);
    return put(s.nnodes, range.back(), o);
  }
  if (k == "max_restarts") return put(s.max_restarts, integer(), o);
  if (k == "checkpoint_dir") return put(s.checkpoint_dir, std::get<std::string>(v), o);
  if (k == "preload") return put_list(s.preload, std::get<std::vector<std::string>>(v), o, append);
  if (k == "rdzv_backend") return put(s.rdzv_backend, std::get<std::string>(v), o);
  if (k == "rdzv_endpoint") return put(s.rdzv_endpoint, std::get<std::string>(v), o);
  if (k == "rdzv_id") return put(s.rdzv_id, std::get<std::string>(v), o);
  if (k == "rdzv_conf") return put(s.rdzv_conf, std::get<std::string>(v), o);
  if (k == "standalone") return put(s.standalone, std::get<bool>(v), o);
  if (k == "node_rank") return put(s.node_rank, integer(), o);
  if (k == "join_timeout") return put(s.join_timeout, std::get<Millis>(v), o);
  if (k == "control_port") return put(s.control_port, integer(), o);
  if (k == "log_dir") return put(s.log_dir, std::get<std::string>(v), o);
  if (k == "console_ranks") {
    auto& ranks = s.console_ranks.value;
    put_list(s.console_ranks, std::get<std::vector<int>>(v), o, append);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    return;
  }
  if (k == "isolate_gpus") return put(s.isolate_gpus, std::get<bool>(v), o);
  if (k == "run_id") return put(s.run_id, std::get<std::string>(v), o);
  if (k == "summary_file") return put(s.summary_file, std::get<std::string>(v), o);
  if (k == "json") return put(s.json, std::get<bool>(v), o);
  if (k == "live") return put(s.live, std::get<bool>(v), o);
  if (k == "quiet") return put(s.quiet, std::get<bool>(v), o);
  if (k == "stdin") return put(s.stdin_rank, std::optional<int>(integer()), o);
  if (k == "timestamps") return put(s.timestamps, std::get<bool>(v), o);
  if (k == "junit_file") return put(s.junit_file, std::get<std::string>(v), o);
  if (k == "tail_lines") return put(s.tail_lines, integer(), o);
  if (k == "mlflow.tracking_uri") return put(s.mlflow_tracking_uri, std::get<std::string>(v), o);
  if (k == "mlflow.experiment") return put(s.mlflow_experiment, std::get<std::string>(v), o);
  if (k == "mlflow.run_name") return put(s.mlflow_run_name, std::get<std::string>(v), o);
  if (k == "mlflow.tags") {
    for (const auto& [name, value] : std::get<std::map<std::string, std::string>>(v))
      s.mlflow_tags.value[name] = value;
    s.mlflow_tags.origin = o;
    return;
  }
  if (k == "mlflow.required") return put(s.mlflow_required, std::get<bool>(v), o);
  if (k == "mlflow.timeout") return put(s.mlflow_timeout, std::get<Millis>(v), o);
  if (k == "no_prefix") return put(s.no_prefix, std::get<bool>(v), o);
  if (k == "nproc_per_node") return put(s.nproc_per_node, std::get<std::string>(v), o);
  if (k == "role") return put(s.role, std::get<std::string>(v), o);
  if (k == "redirects") return put(s.redirects, std::get<std::string>(v), o);
  if (k == "tee") return put(s.tee, std::get<std::string>(v), o);
  if (k == "numa_binding") return put(s.numa_binding, std::get<std::string>(v), o);
  if (k == "signals_to_handle") return put(s.signals_to_handle, std::get<std::string>(v), o);
  if (k == "duplicate_stdout_filters") return put(s.duplicate_stdout_filters, std::get<std::string>(v), o);
  if (k == "duplicate_stderr_filters") return put(s.duplicate_stderr_filters, std::get<std::string>(v), o);
  if (k == "virtual_local_rank") return put(s.virtual_local_rank, std::get<bool>(v), o);
  if (k == "local_ranks_filter") {
    auto& ranks = s.local_ranks_filter.value;
    put_list(s.local_ranks_filter, std::get<std::vector<int>>(v), o, append);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    return;
  }
}

void apply_all(LaunchSpec& spec, const std::vector<Assignment>& assignments) {
  std::set<std::string_view> touched;
  for (const Assignment& a : assignments) apply(spec, a, !touched.insert(a.key->key).second);
}

// The message prefix for a value with this origin: "job.yaml:6:1: no_python",
// "environment variable AIR_RUN_X", "--no-python".
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

std::string show_string(const std::string& s) { return s.empty() ? "\"\"" : s; }

std::string show_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

std::string show_bool(bool b) { return b ? "true" : "false"; }

// The shown value and origin of one key.
std::pair<std::string, Origin> show(const LaunchSpec& s, std::string_view k) {
  if (k == "accelerator_type") {
    return {s.accelerator_type.value.empty() ? "auto" : s.accelerator_type.value, s.accelerator_type.origin};
  }
  if (k == "num_accelerators") {
    const auto& n = s.num_accelerators.value;
    return {n ? std::to_string(*n) : "auto", s.num_accelerators.origin};
  }
  if (k == "cpu_ranks") return {std::to_string(s.cpu_ranks.value), s.cpu_ranks.origin};
  if (k == "timeout") {
    return {s.timeout.value ? format_duration(*s.timeout.value) : "none", s.timeout.origin};
  }
  if (k == "grace_period") return {format_duration(s.grace_period.value), s.grace_period.origin};
  if (k == "hang_timeout") {
    return {s.hang_timeout.value ? format_duration(*s.hang_timeout.value) : "none", s.hang_timeout.origin};
  }
  if (k == "on_hang") return {s.on_hang.value, s.on_hang.origin};
  if (k == "environment.python") return {show_string(s.python.value), s.python.origin};
  if (k == "environment.dependencies") {
    if (!s.requirements_file.value.empty())
      return {"-r " + s.requirements_file.value, s.requirements_file.origin};
    return {show_list(s.dependencies.value), s.dependencies.origin};
  }
  if (k == "environment.find_links") {
    std::vector<std::string> links;
    for (const auto& link : s.find_links.value) links.push_back(redact_urls(link));
    return {show_list(links), s.find_links.origin};
  }
  if (k == "environment.index_url") return {show_string(redact_urls(s.index_url.value)), s.index_url.origin};
  if (k == "environment.no_index") return {show_bool(s.no_index.value), s.no_index.origin};
  if (k == "environment.system_site_packages") {
    return {show_bool(s.system_site_packages.value), s.system_site_packages.origin};
  }
  if (k == "env_cache_dir") {
    return {s.env_cache_dir.value.empty() ? "default" : s.env_cache_dir.value, s.env_cache_dir.origin};
  }
  if (k == "rebuild_env") return {show_bool(s.rebuild_env.value), s.rebuild_env.origin};
  if (k == "env") {
    std::string out = "{";
    for (const auto& [name, value] : s.env.value)
      out += (out.size() > 1 ? ", " : "") + name + "=" + redact_variable(name, value);
    return {out + "}", s.env.origin};
  }
  if (k == "command") return {show_list(s.command.value), s.command.origin};
  if (k == "module") return {show_bool(s.module.value), s.module.origin};
  if (k == "no_python") return {show_bool(s.no_python.value), s.no_python.origin};
  if (k == "master_addr") return {show_string(s.master_addr.value), s.master_addr.origin};
  if (k == "master_port") return {std::to_string(s.master_port.value), s.master_port.origin};
  if (k == "nnodes") {
    const std::string max = std::to_string(s.nnodes.value);
    return {s.nnodes_min.value == s.nnodes.value ? max : std::to_string(s.nnodes_min.value) + ":" + max,
            s.nnodes.origin};
  }
  if (k == "max_restarts") return {std::to_string(s.max_restarts.value), s.max_restarts.origin};
  if (k == "checkpoint_dir") return {show_string(s.checkpoint_dir.value), s.checkpoint_dir.origin};
  if (k == "preload") return {show_list(s.preload.value), s.preload.origin};
  if (k == "rdzv_backend") return {s.rdzv_backend.value, s.rdzv_backend.origin};
  if (k == "rdzv_endpoint") return {show_string(s.rdzv_endpoint.value), s.rdzv_endpoint.origin};
  if (k == "rdzv_id") return {show_string(s.rdzv_id.value), s.rdzv_id.origin};
  if (k == "rdzv_conf") return {show_string(s.rdzv_conf.value), s.rdzv_conf.origin};
  if (k == "standalone") return {show_bool(s.standalone.value), s.standalone.origin};
  if (k == "node_rank") return {std::to_string(s.node_rank.value), s.node_rank.origin};
  if (k == "join_timeout") return {format_duration(s.join_timeout.value), s.join_timeout.origin};
  if (k == "control_port") return {std::to_string(s.control_port.value), s.control_port.origin};
  if (k == "log_dir") return {show_string(s.log_dir.value), s.log_dir.origin};
  if (k == "console_ranks") {
    return {s.console_ranks.value.empty() ? "all" : format_rank_list(s.console_ranks.value),
            s.console_ranks.origin};
  }
  if (k == "isolate_gpus") return {show_bool(s.isolate_gpus.value), s.isolate_gpus.origin};
  if (k == "run_id") return {show_string(s.run_id.value), s.run_id.origin};
  if (k == "summary_file") return {show_string(s.summary_file.value), s.summary_file.origin};
  if (k == "json") return {show_bool(s.json.value), s.json.origin};
  if (k == "live") return {show_bool(s.live.value), s.live.origin};
  if (k == "quiet") return {show_bool(s.quiet.value), s.quiet.origin};
  if (k == "stdin") {
    const auto& n = s.stdin_rank.value;
    return {n ? std::to_string(*n) : "auto", s.stdin_rank.origin};
  }
  if (k == "timestamps") return {show_bool(s.timestamps.value), s.timestamps.origin};
  if (k == "junit_file") return {show_string(s.junit_file.value), s.junit_file.origin};
  if (k == "tail_lines") return {std::to_string(s.tail_lines.value), s.tail_lines.origin};
  if (k == "mlflow.tracking_uri") {
    const std::string& uri = s.mlflow_tracking_uri.value;
    return {uri.empty() ? "none" : without_userinfo(uri), s.mlflow_tracking_uri.origin};
  }
  if (k == "mlflow.experiment") {
    return {s.mlflow_experiment.value.empty() ? "default" : s.mlflow_experiment.value,
            s.mlflow_experiment.origin};
  }
  if (k == "mlflow.run_name") {
    return {s.mlflow_run_name.value.empty() ? "default" : s.mlflow_run_name.value, s.mlflow_run_name.origin};
  }
  if (k == "mlflow.tags") {
    std::string out = "{";
    for (const auto& [name, value] : s.mlflow_tags.value)
      out += (out.size() > 1 ? ", " : "") + name + "=" + value;
    return {out + "}", s.mlflow_tags.origin};
  }
  if (k == "mlflow.required") return {show_bool(s.mlflow_required.value), s.mlflow_required.origin};
  if (k == "mlflow.timeout") return {format_duration(s.mlflow_timeout.value), s.mlflow_timeout.origin};
  if (k == "no_prefix") return {show_bool(s.no_prefix.value), s.no_prefix.origin};
  if (k == "nproc_per_node") {
    return {s.nproc_per_node.value.empty() ? "none" : s.nproc_per_node.value, s.nproc_per_node.origin};
  }
  if (k == "role") return {show_string(s.role.value), s.role.origin};
  if (k == "redirects") return {show_string(s.redirects.value), s.redirects.origin};
  if (k == "tee") return {show_string(s.tee.value), s.tee.origin};
  if (k == "numa_binding") return {s.numa_binding.value, s.numa_binding.origin};
  if (k == "signals_to_handle") {
    return {s.signals_to_handle.value.empty() ? "default" : s.signals_to_handle.value,
            s.signals_to_handle.origin};
  }
  if (k == "duplicate_stdout_filters") {
    return {s.duplicate_stdout_filters.value.empty() ? "none" : s.duplicate_stdout_filters.value,
            s.duplicate_stdout_filters.origin};
  }
  if (k == "duplicate_stderr_filters") {
    return {s.duplicate_stderr_filters.value.empty() ? "none" : s.duplicate_stderr_filters.value,
            s.duplicate_stderr_filters.origin};
  }
  if (k == "virtual_local_rank") return {show_bool(s.virtual_local_rank.value), s.virtual_local_rank.origin};
  if (k == "local_ranks_filter") {
    return {s.local_ranks_filter.value.empty() ? "all" : format_rank_list(s.local_ranks_filter.value),
            s.local_ranks_filter.origin};
  }
  return {"?", Origin{}};
}

} // namespace

std::string Origin::describe() const {
  switch (kind) {
  case Kind::default_value:
    return where.empty() ? "default" : "default, " + where;
  case Kind::file:
    return where;
  case Kind::env:
    return "env " + where;
  case Kind::flag:
    return where.empty() ? "command line" : "flag " + where;
  }
  return "default";
}

namespace {

/// torchrun's values, checked here so a bad one names where it came from.
Status check_torchrun_values(const LaunchSpec& spec) {
  if (!spec.nproc_per_node.value.empty()) {
    AIR_TRY(parse_nproc_per_node(spec.nproc_per_node.value,
                                 place_of(spec.nproc_per_node.origin, "nproc_per_node")));
    if (!spec.num_accelerators.is_default()) {
      return usage_error(place_of(spec.nproc_per_node.origin, "nproc_per_node") +
                         ": give either it or num_accelerators (" + spec.num_accelerators.origin.describe() +
                         ")");
    }
  }
  AIR_TRY(parse_std_streams(spec.redirects.value, place_of(spec.redirects.origin, "redirects")));
  AIR_TRY(parse_std_streams(spec.tee.value, place_of(spec.tee.origin, "tee")));
  if (spec.on_hang.value != "report" && spec.on_hang.value != "stop") {
    return usage_error(place_of(spec.on_hang.origin, "on_hang") + ": " + single_quoted(spec.on_hang.value) +
                       " is not one of report, stop");
  }
  AIR_TRY(parse_numa_mode(spec.numa_binding.value, place_of(spec.numa_binding.origin, "numa_binding")));
  if (!spec.signals_to_handle.is_default()) {
    AIR_TRY(parse_signal_list(spec.signals_to_handle.value,
                              place_of(spec.signals_to_handle.origin, "signals_to_handle")));
  }
  return ok_status();
}

/// `preload` as a list of module names: items split at commas, "none"
/// clearing what came before (a flag turning a file's list off), each name a
/// dotted Python identifier. The warm start forks ranks from an interpreter
/// that imported them; a name that is no module would fail every run there.
Status settle_preload(LaunchSpec& spec) {
  std::vector<std::string> modules;
  const std::string place = place_of(spec.preload.origin, "preload");
  for (const auto& item : spec.preload.value) {
    std::size_t from = 0;
    for (;;) {
      const std::size_t comma = item.find(',', from);
      const std::string name(trim(std::string_view(item).substr(from, comma - from)));
      if (name == "none") {
        modules.clear();
      } else if (!name.empty()) {
        bool ok = true;
        bool start = true;
        for (const char c : name) {
          const bool letter = std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
          const bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
          if (c == '.') {
            ok = ok && !start;
            start = true;
          } else {
            ok = ok && (letter || (digit && !start));
            start = false;
          }
        }
        if (!ok || start)
          return usage_error(place + ": " + single_quoted(name) +
                             " is not a Python module name (like torch or torch.distributed)");
        if (std::find(modules.begin(), modules.end(), name) == modules.end()) modules.push_back(name);
      }
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  spec.preload.value = std::move(modules);
  return ok_status();
}

/// Defaults that depend on how air-run was started. torchrun stops a run only
/// when it ends: a torchrun command line gets no timeout unless one is asked
/// for (a 3 h default would end a multi-day job with exit 124). A Python
/// installed next to air-run (its virtual environment) is the interpreter.
void apply_invocation_defaults(LaunchSpec& spec, const SpecInputs& inputs) {
  if (!inputs.torchrun_style.empty() && spec.timeout.is_default()) {
    spec.timeout.value.reset();
    spec.timeout.origin.where = "torchrun command line (" + inputs.torchrun_style + ")";
  }
  if (!inputs.default_python.empty() && spec.python.is_default()) {
    spec.python.value = inputs.default_python;
    spec.python.origin.where = inputs.default_python_why;
  }
}

} // namespace

Expected<ResolvedSpec> resolve_spec(const SpecInputs& inputs) {
  ResolvedSpec resolved;
  std::vector<Assignment> from_file;
  std::vector<Assignment> from_env;
  std::vector<Assignment> from_flags;
  if (inputs.file_text) {
    const std::string file = inputs.file_path.empty() ? "<spec>" : inputs.file_path;
    FileReader reader(file, resolved.warnings, from_file);
    AIR_TRY(reader.read(*inputs.file_text));
    resolved.spec.spec_path = inputs.file_path;
  }
  AIR_TRY(read_environment(inputs.environment, resolved.warnings, from_env));
  AIR_TRY(read_flags(inputs, resolved.warnings, from_flags));

  LaunchSpec& spec = resolved.spec;
  apply_all(spec, from_file);
  apply_all(spec, from_env);
  apply_all(spec, from_flags);

  if (spec.module.value && spec.no_python.value) {
    return usage_error(place_of(spec.no_python.origin, "no_python") +
                       ": cannot be used together with module (" + spec.module.origin.describe() + ")");
  }
  AIR_TRY(check_torchrun_values(spec));
  AIR_TRY(settle_preload(spec));
  apply_invocation_defaults(spec, inputs);
  AIR_TRY(settle_rendezvous(spec, [](const Origin& o, std::string_view key) { return place_of(o, key); }));
  return resolved;
}

std::string without_userinfo(std::string_view uri) {
  const std::size_t scheme = uri.find("://");
  if (scheme == std::string_view::npos) return std::string(uri);
  const std::size_t host = scheme + 3;
  const std::size_t end = std::min(uri.find_first_of("/?#", host), uri.size());
  const std::size_t at = uri.substr(0, end).rfind('@');
  if (at == std::string_view::npos || at < host) return std::string(uri);
  return std::string(uri.substr(0, host)) + std::string(uri.substr(at + 1));
}

std::vector<std::string> describe_spec(const LaunchSpec& spec) {
  std::vector<std::string> lines;
  for (const SpecKey& row : spec_keys()) {
    const auto [value, origin] = show(spec, row.key);
    lines.push_back(std::string(row.key) + " = " + value + "  (" + origin.describe() + ")");
  }
  return lines;
}

} // namespace air
