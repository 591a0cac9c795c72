#include "core/run/error_file.hpp"

#include "core/base/json_depth.hpp"
#include "core/base/json_error.hpp"
#include "core/base/text.hpp"
#include "core/os/file_read.hpp"
#include "core/run/python_traceback.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>

namespace air {
namespace {

using nlohmann::json;

// torch writes timestamps as strings of epoch seconds; accept numbers too.
std::optional<std::int64_t> read_timestamp(const json& v) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // Casting an out-of-range double is undefined behaviour: check first.
    if (d >= -9.2e18 && d <= 9.2e18) return static_cast<std::int64_t>(d);
    return std::nullopt;
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    std::int64_t out = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && end == s.data() + s.size()) return out;
  }
  return std::nullopt;
}

std::string string_at(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// An error file is the rank's own text, and every report shows it: no
// escape sequence or NUL byte gets through (docs/console.md).
ErrorFileRecord without_control_characters(ErrorFileRecord record) {
  record.type = strip_control_characters(record.type);
  record.message = strip_control_characters(record.message, LineBreaks::keep);
  record.traceback = strip_control_characters(record.traceback, LineBreaks::keep);
  record.raw = strip_control_characters(record.raw, LineBreaks::keep);
  return record;
}

bool is_identifier_part(char c, bool first) {
  const auto u = static_cast<unsigned char>(c);
  return c == '_' || std::isalpha(u) || (!first && std::isdigit(u));
}

std::optional<unsigned> hex4(std::string_view text, std::size_t at) {
  if (at + 4 > text.size()) return std::nullopt;
  unsigned value = 0;
  for (std::size_t i = at; i < at + 4; ++i) {
    const char c = text[i];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + static_cast<unsigned>(digit);
  }
  return value;
}

/// `text` with each \uD800-\uDFFF escape that is not half of a pair made
/// \uFFFD. Python's json.dump writes a file name that is not UTF-8 (its
/// surrogate escapes) that way, torch's @record included, and the JSON
/// reader refuses the whole file for it: the exception was lost.
std::string without_lone_surrogates(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 >= text.size()) {
      out.push_back(text[i]);
      continue;
    }
    if (text[i + 1] != 'u') {
      out.append(text.substr(i, 2)); // \\ or \" is one escape: never the start of another
      ++i;
      continue;
    }
    const auto value = hex4(text, i + 2);
    if (!value || *value < 0xD800 || *value > 0xDFFF) {
      out.push_back(text[i]);
      continue;
    }
    if (*value <= 0xDBFF && text.substr(i + 6, 2) == "\\u") {
      const auto low = hex4(text, i + 8);
      if (low && *low >= 0xDC00 && *low <= 0xDFFF) {
        out.append(text.substr(i, 12));
        i += 11;
        continue;
      }
    }
    out.append("\\ufffd");
    i += 5;
  }
  return out;
}

} // namespace

ErrorFileRecord malformed_error_file(std::string why, std::string_view text) {
  ErrorFileRecord r;
  r.malformed = true;
  r.message = std::move(why);
  r.raw = std::string(text.substr(0, k_error_raw_bytes));
  return r;
}

std::pair<std::string, std::string> split_exception_message(std::string_view message) {
  const auto colon = message.find(':');
  if (colon == std::string_view::npos || colon == 0) return {"", std::string(message)};
  const std::string_view type = message.substr(0, colon);
  bool first = true;
  for (char c : type) {
    if (c == '.') {
      if (first) return {"", std::string(message)};
      first = true;
      continue;
    }
    if (!is_identifier_part(c, first)) return {"", std::string(message)};
    first = false;
  }
  if (first) return {"", std::string(message)}; // ends with '.'
  std::string_view rest = message.substr(colon + 1);
  if (!rest.empty() && rest.front() == ' ')
    rest.remove_prefix(1);
  else if (!rest.empty())
    return {"", std::string(message)}; // "http://..." is not "Type: msg"
  return {std::string(type), std::string(rest)};
}

ErrorFileRecord parse_error_file(std::string_view text) {
  if (json_nesting_depth(text) > k_max_json_depth) {
    return malformed_error_file("nested deeper than " + std::to_string(k_max_json_depth) + " levels", text);
  }
  json data;
  try {
    const std::string clean = without_lone_surrogates(text);
    data = json::parse(clean.begin(), clean.end());
  } catch (const json::exception& e) {
    return malformed_error_file("not JSON: " + json_error_message(e), text);
  }
  if (!data.is_object() || !data.contains("message")) {
    return malformed_error_file("no \"message\" string or object", text);
  }
  const json& message = data["message"];
  ErrorFileRecord r;
  std::string full_message;
  if (message.is_string()) {
    // torchelastic's "new format": timestamp at the top level.
    full_message = message.get<std::string>();
    if (data.contains("timestamp")) r.timestamp = read_timestamp(data["timestamp"]);
    if (data.contains("extraInfo")) r.traceback = string_at(data["extraInfo"], "py_callstack");
  } else if (message.is_object()) {
    full_message = string_at(message, "message");
    if (message.contains("extraInfo")) {
      const json& extra = message["extraInfo"];
      r.traceback = string_at(extra, "py_callstack");
      if (extra.is_object() && extra.contains("timestamp")) r.timestamp = read_timestamp(extra["timestamp"]);
    }
    if (message.contains("errorCode") && message["errorCode"].is_number_integer()) {
      r.error_code = message["errorCode"].get<int>();
    }
  } else {
    return malformed_error_file("no \"message\" string or object", text);
  }
  auto [type, rest] = split_exception_message(full_message);
  r.type = std::move(type);
  r.message = std::move(rest);
  return r;
}

std::optional<ErrorFileRecord> read_error_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  FileRead file = read_small_file(path, k_max_error_file_bytes, FileWriter::us);
  switch (file.state) {
  case FileRead::State::missing:
    return std::nullopt;
  case FileRead::State::too_large:
    return malformed_error_file("error file is " + std::to_string(file.size) + " bytes, over the limit of " +
                                    std::to_string(k_max_error_file_bytes) + " bytes",
                                "");
  case FileRead::State::unreadable:
    return malformed_error_file(file.error, "");
  case FileRead::State::ok:
    break;
  }
  return without_control_characters(parse_error_file(file.text));
}

std::string exception_headline(const ErrorFileRecord& record) {
  if (record.malformed || record.type.empty()) return "";
  // The message's first line: a reason is one line.
  std::string line = record.type;
  const std::string first = record.message.substr(0, record.message.find('\n'));
  if (!first.empty()) line += ": " + first;
  if (const auto frame = innermost_frame(record.traceback)) {
    const auto slash = frame->file.find_last_of('/');
    line += " (" + (slash == std::string::npos ? frame->file : frame->file.substr(slash + 1)) + ":" +
            std::to_string(frame->line) + ")";
  }
  return line;
}

} // namespace air
