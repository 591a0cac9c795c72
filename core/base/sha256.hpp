#pragma once

#include <string>
#include <string_view>

namespace air {

/// SHA-256 of `data` as 64 lowercase hex characters (FIPS 180-4). Used for
/// cache keys, where a stable, collision-resistant name matters and speed does
/// not; kept in-tree so air-run needs no crypto library.
std::string sha256_hex(std::string_view data);

} // namespace air
