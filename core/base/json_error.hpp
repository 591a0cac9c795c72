#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace air {

/// nlohmann's exception text without its "[json.exception.parse_error.101] "
/// prefix: "parse error at line 1, column 7: syntax error while parsing ...".
std::string json_error_message(const nlohmann::json::exception& e);

} // namespace air
