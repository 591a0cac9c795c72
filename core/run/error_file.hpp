#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

// A rank's TORCHELASTIC_ERROR_FILE: what it died of, as torch's @record or
// air-run's rank shim writes it. Read by the supervisor (the failure's
// reason) and by the reports.

namespace air {

/// Largest TORCHELASTIC_ERROR_FILE air-run parses (4 MiB): a Python traceback
/// is kilobytes; anything bigger is kept only as a raw excerpt.
inline constexpr std::uint64_t k_max_error_file_bytes = 4ULL * 1024 * 1024;

/// Bytes of a malformed error file kept as raw text.
inline constexpr std::size_t k_error_raw_bytes = 64 * 1024;

/// What a rank's TORCHELASTIC_ERROR_FILE says. torch's `@record` writes
///   {"message": {"message": "RuntimeError: boom",
///                "extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1712484803"}}}
/// (a parent torchrun may add "errorCode" inside "message"); torchelastic also
/// accepts a "new format" where "message" is a string and "timestamp" sits at
/// the top level. Both are read. Anything else is `malformed`, which is
/// reported, never fatal (torchrun's agent crashes on it; air-run does not).
struct ErrorFileRecord {
  std::string type;      ///< "RuntimeError": the exception type the message starts with, or ""
  std::string message;   ///< "boom" (the rest of the message); for malformed files, why
  std::string traceback; ///< extraInfo.py_callstack, "" when absent
  std::optional<std::int64_t> timestamp; ///< epoch seconds (string or number in the file)
  std::optional<int> error_code;         ///< message.errorCode when present
  bool malformed = false;                ///< not torchelastic's format: see `raw`
  std::string raw;                       ///< malformed: the file's text (first k_error_raw_bytes bytes)
};

/// A record for an error file that could not be used: `why` is the message,
/// the start of `text` is kept raw.
ErrorFileRecord malformed_error_file(std::string why, std::string_view text);

/// Parses an error file's text. Pure; never throws.
/// Malformed texts give `malformed = true`, `message` = the reason
/// ("not JSON: parse error at line 1, column 1: ..." or
/// "no \"message\" string or object"), and `raw` = the text.
ErrorFileRecord parse_error_file(std::string_view text);

/// Splits "RuntimeError: boom" into ("RuntimeError", "boom"). The type must be
/// a dotted Python identifier; otherwise the type is "" and the message is whole.
std::pair<std::string, std::string> split_exception_message(std::string_view message);

/// Reads the error file at `path`, with no escape sequence or NUL byte left in
/// its text (every report shows it). nullopt when `path` is "" or there is no
/// file (the rank wrote none). Unreadable or oversized files are malformed
/// records saying why. Never throws.
std::optional<ErrorFileRecord> read_error_file(const std::string& path);

/// The one line that names what a rank died of: "RuntimeError: injected
/// failure (train.py:27)", with the innermost frame of the rank's own code
/// (library frames skipped; the file's name without its folder). "" for a
/// malformed record or one without an exception type. Pure.
std::string exception_headline(const ErrorFileRecord& record);

} // namespace air
