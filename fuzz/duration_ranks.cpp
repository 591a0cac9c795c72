// Fuzz target: durations ("1h30m") and rank lists ("0,2-3"), with the
// promise that what is formatted parses back to the same value.
#include "core/base/duration.hpp"
#include "core/base/text.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size); // NOLINT
  if (auto d = air::parse_duration(text, "fuzz")) {
    auto again = air::parse_duration(air::format_duration(*d), "fuzz");
    if (!again || *again != *d) std::abort();
  }
  (void)air::parse_opt_duration(text, "fuzz");
  if (auto ranks = air::parse_rank_list(text, "fuzz")) {
    auto again = air::parse_rank_list(air::format_rank_list(*ranks), "fuzz");
    if (!again || *again != *ranks) std::abort();
  }
  (void)air::split_command_line(text, "fuzz");
  return 0;
}
