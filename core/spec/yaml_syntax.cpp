// The strict syntax check in front of yaml-cpp: libyaml's event parser, read to
// the end of the stream. Nothing is built here; resolve_file.cpp reads the tree.
#include "core/spec/yaml_syntax.hpp"

#if AIR_HAVE_LIBYAML
#include <yaml.h>

#include <set>

namespace air {
namespace {

std::string line_col(const yaml_mark_t& mark) {
  return std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

/// Owns a libyaml parser for one check.
class EventParser {
public:
  explicit EventParser(std::string_view text) {
    ok_ = yaml_parser_initialize(&parser_) != 0;
    if (ok_) {
      yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                   text.size());
    }
  }
  ~EventParser() {
    if (ok_) yaml_parser_delete(&parser_);
  }
  EventParser(const EventParser&) = delete;
  EventParser& operator=(const EventParser&) = delete;

  bool initialized() const { return ok_; }
  yaml_parser_t& get() { return parser_; }

private:
  yaml_parser_t parser_{};
  bool ok_ = false;
};

/// Owns one event.
struct Event {
  yaml_event_t event{};
  ~Event() { yaml_event_delete(&event); }
};

/// Where the reader (bytes to characters) stopped: it gives an offset, not a mark.
yaml_mark_t mark_at(std::string_view text, std::size_t offset) {
  yaml_mark_t mark{};
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++mark.line;
      mark.column = 0;
    } else {
      ++mark.column;
    }
  }
  return mark;
}

Error syntax_error(const yaml_parser_t& parser, std::string_view text, const std::string& file) {
  const yaml_mark_t at =
      parser.error == YAML_READER_ERROR ? mark_at(text, parser.problem_offset) : parser.problem_mark;
  std::string message = file + ":" + line_col(at) +
                        ": invalid YAML: " + (parser.problem != nullptr ? parser.problem : "unreadable text");
  if (parser.context != nullptr) {
    message += std::string(" (") + parser.context + " that starts at " + line_col(parser.context_mark) + ")";
  }
  return usage_error(std::move(message));
}

} // namespace

Status check_yaml_syntax(std::string_view text, const std::string& file) {
  EventParser parser(text);
  if (!parser.initialized()) return usage_error(file + ": invalid YAML: the parser could not start");
  std::set<std::string> anchors;
  std::size_t depth = 0; // the collections open around the next event
  for (;;) {
    Event e;
    if (yaml_parser_parse(&parser.get(), &e.event) == 0) return syntax_error(parser.get(), text, file);
    const auto anchor = [&]() -> const unsigned char* {
      switch (e.event.type) {
      case YAML_SCALAR_EVENT:
        return e.event.data.scalar.anchor;
      case YAML_SEQUENCE_START_EVENT:
        return e.event.data.sequence_start.anchor;
      case YAML_MAPPING_START_EVENT:
        return e.event.data.mapping_start.anchor;
      default:
        return nullptr;
      }
    }();
    if (anchor != nullptr) anchors.insert(reinterpret_cast<const char*>(anchor));
    if (e.event.type == YAML_ALIAS_EVENT) {
      const std::string name = reinterpret_cast<const char*>(e.event.data.alias.anchor);
      if (anchors.count(name) == 0) {
        return usage_error(file + ":" + line_col(e.event.start_mark) + ": invalid YAML: alias *" + name +
                           " names no anchor defined before it");
      }
    }
    if (e.event.type == YAML_SEQUENCE_START_EVENT || e.event.type == YAML_MAPPING_START_EVENT) {
      // Refused here, at the first level too deep: libyaml's scanner and
      // yaml-cpp's tree cost more with every open level (a line of 100,000
      // '[' took 21 s to refuse), and nothing after the place changes the verdict.
      if (++depth > k_max_yaml_depth) {
        return usage_error(file + ":" + line_col(e.event.start_mark) + ": invalid YAML: nested deeper than " +
                           std::to_string(k_max_yaml_depth) + " levels");
      }
    }
    if (e.event.type == YAML_SEQUENCE_END_EVENT || e.event.type == YAML_MAPPING_END_EVENT) --depth;
    if (e.event.type == YAML_STREAM_END_EVENT) return ok_status();
  }
}

bool yaml_syntax_is_strict() { return true; }

} // namespace air

#else // built without libyaml: yaml-cpp's checks only

namespace air {

Status check_yaml_syntax(std::string_view /*text*/, const std::string& /*file*/) { return ok_status(); }

bool yaml_syntax_is_strict() { return false; }

} // namespace air

#endif
