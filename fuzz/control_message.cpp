// Fuzz target: one control-protocol line as a peer could send it: the join
// handshake's lines and every message, after the same control-character
// stripping the socket reader applies. A parsed message formats to a line
// that parses back to the same message.
#include "core/cluster/control_message.hpp"

#include "core/base/text.hpp"
#include "core/cluster/control_auth.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string line =
      air::strip_control_characters(std::string_view(reinterpret_cast<const char*>(data), size)); // NOLINT
  for (char c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) std::abort();
  }
  (void)air::parse_challenge(line);
  (void)air::parse_auth(line);
  (void)air::parse_proof(line);
  auto m = air::parse_control_message(line);
  if (!m) return 0;
  std::string formatted = air::format_control_message(*m);
  if (formatted.empty() || formatted.back() != '\n') std::abort();
  formatted.pop_back();
  auto again = air::parse_control_message(formatted);
  if (!again || again->kind != m->kind || again->exit_code != m->exit_code ||
      again->node_rank != m->node_rank)
    std::abort();
  if (m->kind == air::ControlMessage::Kind::place &&
      (again->round != m->round || again->count != m->count || again->place.rank != m->place.rank ||
       again->place.steps != m->place.steps || again->place.in_collective != m->place.in_collective))
    std::abort();
  if ((m->kind == air::ControlMessage::Kind::preempt || m->kind == air::ControlMessage::Kind::counted ||
       m->kind == air::ControlMessage::Kind::stopat) &&
      (again->signal != m->signal || again->grace_ms != m->grace_ms || again->count != m->count ||
       again->steps != m->steps || again->rate_milli != m->rate_milli))
    std::abort();
  return 0;
}
