// The spec file: YAML text to assignments. libyaml's strict check reads the
// text first (core/spec/yaml_syntax.hpp), then yaml-cpp's tree is walked key
// by key, so that every error and every value knows its file:line:col.
#include "core/base/suggest.hpp"
#include "core/spec/resolve_parts.hpp"
#include "core/spec/yaml_syntax.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <sstream>

namespace air::resolve_parts {
namespace {

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
    std::set<int> seen;
    AIR_TRY(refuse_nul(docs[0], "", seen));
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

  // No string of a spec may hold a NUL byte (a double-quoted "\0", "\x00" or
  // "\u0000"): no argument or environment variable can carry one, so a fresh
  // rank would see the string cut there and the warm start's NUL-separated
  // request would split it into more fields (`x\0RANK=0` set RANK).
  // Each collection is visited once, known by its place in the file: an alias
  // is the anchored node itself, so `a: &x {b: *x}` is a cycle (it recursed
  // until the stack ran out) and nested aliases can repeat a node
  // exponentially often.
  Status refuse_nul(const YAML::Node& node, const std::string& path, std::set<int>& seen) const {
    const auto refused = [&](const YAML::Node& at, const std::string& what) {
      return usage_error(mark_text(file_, at.Mark()) + ": " + what +
                         ": contains a NUL byte (\\0), which no argument or environment variable can hold");
    };
    if (node.IsScalar()) {
      if (node.Scalar().find('\0') != std::string::npos) return refused(node, path);
      return ok_status();
    }
    if (!(node.IsSequence() || node.IsMap()) || !seen.insert(node.Mark().pos).second) return ok_status();
    if (node.IsSequence()) {
      for (const YAML::Node& item : node) AIR_TRY(refuse_nul(item, path, seen));
    } else {
      for (auto it = node.begin(); it != node.end(); ++it) {
        const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string();
        if (key.find('\0') != std::string::npos)
          return refused(it->first, path.empty() ? "a key" : path + ": a key");
        AIR_TRY(refuse_nul(it->second, path.empty() ? key : path + "." + key, seen));
      }
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
      if (value.IsSequence()) return read_strings(row, name, value);
      return wrong_kind();
    case ValueType::string_map:
      if (value.IsNull()) return Value(std::map<std::string, std::string>());
      if (value.IsMap()) return read_pairs(row, name, value);
      return wrong_kind();
    case ValueType::rank_list:
      if (value.IsNull()) return Value(std::vector<int>());
      if (value.IsScalar()) return parse_text(row, value.Scalar(), Source::file, prefix, warnings_);
      if (value.IsSequence()) return read_ranks(row, name, value);
      return wrong_kind();
    default:
      if (!value.IsScalar()) return wrong_kind();
      return parse_text(row, value.Scalar(), Source::file, prefix, warnings_);
    }
  }

  // A YAML list of strings, each item with its own place.
  Expected<Value> read_strings(const SpecKey& row, const std::string& name, const YAML::Node& list) {
    std::vector<std::string> items;
    for (const YAML::Node& item : list) {
      const std::string item_prefix = mark_text(file_, item.Mark()) + ": " + name;
      auto text = scalar_text(row, item_prefix, item);
      if (!text) return text.error();
      items.push_back(std::move(*text));
    }
    return Value(std::move(items));
  }

  // A YAML mapping of NAME: string (`env`, `mlflow.tags`), names checked and unique.
  Expected<Value> read_pairs(const SpecKey& row, const std::string& name, const YAML::Node& map) {
    std::map<std::string, std::string> vars;
    for (auto it = map.begin(); it != map.end(); ++it) {
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
    return Expected<Value>(std::in_place, std::move(vars));
  }

  // A YAML list of ranks or rank ranges ("0,2-3" each), as one sorted set.
  Expected<Value> read_ranks(const SpecKey& row, const std::string& name, const YAML::Node& list) {
    std::set<int> ranks;
    for (const YAML::Node& item : list) {
      const std::string item_prefix = mark_text(file_, item.Mark()) + ": " + name;
      auto text = scalar_text(row, item_prefix, item);
      if (!text) return text.error();
      auto some = parse_rank_list(*text, item_prefix);
      if (!some) return some.error();
      ranks.insert(some->begin(), some->end());
    }
    return Value(std::vector<int>(ranks.begin(), ranks.end()));
  }

  std::string file_;
  std::vector<std::string>& warnings_;
  std::vector<Assignment>& out_;
  std::map<std::string, std::string> seen_; // full key -> where, for duplicates
  std::map<std::string_view, Given> given_; // table key -> spelling used, for legacy conflicts
};

} // namespace

Status read_spec_file(const std::string& text, const std::string& file, std::vector<std::string>& warnings,
                      std::vector<Assignment>& out) {
  FileReader reader(file, warnings, out);
  return reader.read(text);
}

} // namespace air::resolve_parts
