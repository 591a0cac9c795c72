// The control connection's join handshake and peer-text hygiene, without the OS.
#include "core/cluster/control_auth.hpp"

#include "core/base/sha256.hpp"

namespace air {
namespace {

bool is_hex(std::string_view text) {
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool is_proof(std::string_view text) { return text.size() == 64 && is_hex(text); }

// The rest of `line` after "VERB ", or nothing when it starts otherwise.
std::optional<std::string_view> after_verb(std::string_view line, std::string_view verb) {
  if (line.size() <= verb.size() || line.substr(0, verb.size()) != verb || line[verb.size()] != ' ')
    return std::nullopt;
  return line.substr(verb.size() + 1);
}

} // namespace

std::string join_proof(const JoinSecret& secret, JoinRole role, std::string_view node0_nonce,
                       std::string_view agent_nonce) {
  std::string message = "air-run join\n";
  message += role == JoinRole::agent ? "agent\n" : "node0\n";
  message += secret.job_id;
  message += '\n';
  message += node0_nonce;
  message += '\n';
  message += agent_nonce;
  return hmac_sha256_hex(secret.token, message);
}

bool is_join_nonce(std::string_view text) { return text.size() >= 32 && text.size() <= 64 && is_hex(text); }

std::string format_challenge(std::string_view nonce) { return "challenge " + std::string(nonce) + "\n"; }

std::string format_auth(std::string_view nonce, std::string_view proof) {
  return "auth " + std::string(nonce) + " " + std::string(proof) + "\n";
}

std::string format_proof(std::string_view proof) { return "proof " + std::string(proof) + "\n"; }

std::optional<std::string> parse_challenge(std::string_view line) {
  const auto rest = after_verb(line, "challenge");
  if (!rest || !is_join_nonce(*rest)) return std::nullopt;
  return std::string(*rest);
}

std::optional<AuthLine> parse_auth(std::string_view line) {
  const auto rest = after_verb(line, "auth");
  if (!rest) return std::nullopt;
  const std::size_t space = rest->find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  AuthLine auth{std::string(rest->substr(0, space)), std::string(rest->substr(space + 1))};
  if (!is_join_nonce(auth.nonce) || !is_proof(auth.proof)) return std::nullopt;
  return auth;
}

std::optional<std::string> parse_proof(std::string_view line) {
  const auto rest = after_verb(line, "proof");
  if (!rest || !is_proof(*rest)) return std::nullopt;
  return std::string(*rest);
}

} // namespace air
