#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace air {

/// The join handshake that keeps strangers off node 0's control port. Every
/// node holds the same join token (a secret from its launch environment) and
/// the job id; neither is ever sent. Lines, before `hello`:
///
///   challenge NONCE          node 0 -> agent, as soon as it connects
///   auth NONCE PROOF         agent -> node 0: PROOF = HMAC(token, "agent", job, both nonces)
///   proof PROOF              node 0 -> agent: HMAC(token, "node0", job, both nonces)
///
/// Node 0 reads nothing else from a connection until its `auth` checks out,
/// and drops one that fails without disturbing the join; an agent believes no
/// `start` before node 0's `proof`, so neither side can be impersonated.
/// Fresh nonces on both sides make a recorded exchange useless later.
struct JoinSecret {
  std::string token;  ///< the shared secret ("" when none was given: the job id alone binds)
  std::string job_id; ///< the Slurm job id, else "", bound into every proof
};

/// Which side a proof speaks for; the two proofs of one exchange differ.
enum class JoinRole { agent, node0 };

/// HMAC-SHA-256 over the role, job id and both nonces, in hex.
std::string join_proof(const JoinSecret& secret, JoinRole role, std::string_view node0_nonce,
                       std::string_view agent_nonce);

/// Whether `text` is a nonce as `challenge` and `auth` carry: 32 to 64 lowercase hex digits.
bool is_join_nonce(std::string_view text);

std::string format_challenge(std::string_view nonce);
std::string format_auth(std::string_view nonce, std::string_view proof);
std::string format_proof(std::string_view proof);

/// The nonce of a well-formed `challenge` line, else nothing.
std::optional<std::string> parse_challenge(std::string_view line);
/// The agent's nonce and proof of a well-formed `auth` line, else nothing.
struct AuthLine {
  std::string nonce;
  std::string proof;
};
std::optional<AuthLine> parse_auth(std::string_view line);
/// The proof of a well-formed `proof` line, else nothing.
std::optional<std::string> parse_proof(std::string_view line);

} // namespace air
