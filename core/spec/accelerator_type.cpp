#include "core/spec/accelerator_type.hpp"

#include "core/base/text.hpp"

#include <algorithm>

namespace air {

namespace {

bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }

/// A model token: a letter first, then letters and digits ("H100", "RTX4090").
bool is_model(std::string_view model) {
  return !model.empty() && is_upper(model.front()) &&
         std::all_of(model.begin(), model.end(), [](char c) { return is_upper(c) || is_digit(c); });
}

} // namespace

std::string AcceleratorType::canonical() const {
  if (cpu) return "CPU";
  if (legacy) return model;
  return "GPU_" + std::to_string(count) + "x" + model;
}

Expected<AcceleratorType> parse_accelerator_type(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return usage_error(std::string(why) + ", got " + single_quoted(text));
  };
  const auto expected_form = [&] { return bad("expected CPU or GPU_<n>x<MODEL> (like GPU_8xH100)"); };
  const std::string up = upper(text);
  AcceleratorType type;
  if (up == "CPU") {
    type.cpu = true;
    return type;
  }
  if (up.rfind("GPU_", 0) == 0) {
    const std::string_view rest = std::string_view(up).substr(4);
    const auto x = rest.find('X');
    if (x == std::string_view::npos || !all_digits(rest.substr(0, x))) return expected_form();
    const std::string_view digits = rest.substr(0, x);
    if (!is_model(rest.substr(x + 1))) return expected_form();
    const std::string_view significant =
        digits.substr(std::min(digits.find_first_not_of('0'), digits.size()));
    if (significant.size() > 4) return bad("count is too large (at most 9999)");
    for (char c : significant) type.count = type.count * 10 + (c - '0');
    if (type.count < 1) return bad("count must be at least 1");
    type.model = std::string(rest.substr(x + 1));
    return type;
  }
  // Legacy serverless_gpu values are a bare model ("A10", "H100", "B300"):
  // letters, then at least one digit, nothing but letters and digits.
  const std::size_t letters = up.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ");
  if (letters == 0 || letters == std::string::npos || !is_digit(up[letters]) || !is_model(up)) {
    return expected_form();
  }
  type.legacy = true;
  type.model = up;
  return type;
}

} // namespace air
