#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace air {

/// A connection node 0's agent holds before its `hello`, as the admission
/// rules see it.
struct WaitingConnection {
  std::string source;         ///< the peer's address without the port ("127.0.0.2", "::ffff:10.0.0.5")
  bool authenticated = false; ///< its `auth` checked out: a real agent, never pushed out
  std::chrono::steady_clock::time_point connected{};
};

/// How many connections may wait, per source and in all, and how long a new
/// one is safe from being pushed out: a real agent answers the challenge
/// within one round trip, so a connection still silent after `grace` had its
/// chance.
struct AdmissionLimits {
  std::size_t max_waiting = 64;
  std::size_t max_per_source = 8;
  std::chrono::milliseconds grace{1'000};
};

/// What to do with a new connection: keep it, keep it after closing
/// waiting[evict], or close it at once (its agent retries).
struct Admission {
  enum class Verdict { admit, evict_then_admit, refuse };
  Verdict verdict = Verdict::admit;
  std::size_t evict = 0;
};

/// Node 0's rule for a new connection from `source`, so that strangers
/// flooding the control port cannot push a real node out: a source at its
/// limit makes room only from its own connections, and only from one that
/// stayed silent past the grace time; when every slot is taken the source
/// holding the most makes room the same way. An authenticated connection is
/// never pushed out. Pure.
Admission admit_connection(const std::vector<WaitingConnection>& waiting, const std::string& source,
                           std::chrono::steady_clock::time_point now, const AdmissionLimits& limits);

/// When the process ran out of descriptors: the waiting connection to close
/// to make room (the oldest silent one past the grace time of the source
/// holding the most), or nullopt when none may go. Pure.
std::optional<std::size_t> connection_to_drop(const std::vector<WaitingConnection>& waiting,
                                              std::chrono::steady_clock::time_point now,
                                              const AdmissionLimits& limits);

} // namespace air
