// Fuzz target: a spec file's YAML through resolve_spec (every key's parser).
#include "core/spec/spec.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  air::SpecInputs in;
  in.file_text = std::string(reinterpret_cast<const char*>(data), size); // NOLINT
  in.file_path = "fuzz.yaml";
  auto resolved = air::resolve_spec(in);
  if (resolved) (void)air::describe_spec(resolved->spec); // --dry-run's listing of what was read
  return 0;
}
