// Fuzz target: a rank's result file, parsed and written back out as the
// summary does.
#include "core/report/rank_result.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size); // NOLINT
  const air::RankResult result = air::parse_rank_result(text);
  if (result.state == air::RankResult::State::ok) (void)result.value.dump(2);
  return 0;
}
