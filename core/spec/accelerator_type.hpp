#pragma once

#include "core/base/error.hpp"

#include <string>
#include <string_view>

namespace air {

/// A requested accelerator type: "CPU", "GPU_<n>x<MODEL>" (any case), or a
/// legacy serverless_gpu model name such as "H100", which names the model
/// family only. Pure data.
struct AcceleratorType {
  bool cpu = false;
  int count = 0;       ///< GPUs asked for; 0 for a legacy model (the family only)
  std::string model;   ///< upper case: "H100", "RTX4090"
  bool legacy = false; ///< written in the legacy short form ("H100")

  /// "CPU", "GPU_8xH100", or for a legacy model the model itself ("H100").
  std::string canonical() const;
};

/// The most GPUs one type may name: more is a typo, not a node.
inline constexpr int k_max_accelerator_count = 9999;

/// The one parser of accelerator types, shared by the spec (which checks and
/// normalises what the user wrote) and the hardware match. Errors (usage kind)
/// carry the reason alone, for the caller to put after its own prefix:
/// "expected CPU or GPU_<n>x<MODEL> (like GPU_8xH100), got 'TPU'",
/// "count must be at least 1, got 'GPU_0xH100'", "count is too large (at most 9999), got '...'". Pure.
Expected<AcceleratorType> parse_accelerator_type(std::string_view text);

} // namespace air
