#pragma once

#include <array>
#include <string>
#include <string_view>

namespace air {

/// SHA-256 of `data` as 64 lowercase hex characters (FIPS 180-4). Used for
/// cache keys, where a stable, collision-resistant name matters and speed does
/// not; kept in-tree so air-run needs no crypto library.
std::string sha256_hex(std::string_view data);

/// The 32 bytes of a SHA-256 digest.
using Sha256Digest = std::array<unsigned char, 32>;

/// SHA-256 of `data` as raw bytes.
Sha256Digest sha256(std::string_view data);

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`, as 64 lowercase hex
/// characters. Proves knowledge of a shared secret (the multi-node join
/// token) without sending it.
std::string hmac_sha256_hex(std::string_view key, std::string_view message);

/// Compares two strings in time that depends only on their length, so the
/// position of the first difference in a proof does not leak through timing.
bool equal_in_constant_time(std::string_view a, std::string_view b);

} // namespace air
