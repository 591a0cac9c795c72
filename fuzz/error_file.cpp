// Fuzz target: torchelastic's error file (TORCHELASTIC_ERROR_FILE), both formats.
#include "core/run/error_file.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)air::parse_error_file(std::string_view(reinterpret_cast<const char*>(data), size)); // NOLINT
  return 0;
}
