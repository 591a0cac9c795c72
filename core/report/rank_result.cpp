#include "core/report/rank_result.hpp"

#include "core/base/json_error.hpp"

#include <string>

namespace air {

std::string_view to_string(RankResult::State state) {
  switch (state) {
  case RankResult::State::missing:
    return "missing";
  case RankResult::State::ok:
    return "ok";
  case RankResult::State::invalid:
    return "invalid";
  case RankResult::State::too_large:
    return "too_large";
  }
  return "invalid";
}

RankResult parse_rank_result(std::string_view text) {
  RankResult result;
  result.size_bytes = text.size();
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    // Said in our words: nlohmann's wording for empty input differs between releases.
    result.state = RankResult::State::invalid;
    result.error = "the file is empty (expected one JSON value)";
    result.excerpt = std::string(text.substr(0, k_result_excerpt_bytes));
    return result;
  }
  try {
    result.value = nlohmann::ordered_json::parse(text.begin(), text.end());
    result.state = RankResult::State::ok;
  } catch (const nlohmann::json::exception& e) {
    result.state = RankResult::State::invalid;
    result.error = json_error_message(e);
    result.excerpt = std::string(text.substr(0, k_result_excerpt_bytes));
    result.value = nullptr;
  }
  return result;
}

} // namespace air
