#pragma once

#include "core/base/error.hpp"
#include "core/spec/spec.hpp"

#include <functional>
#include <string>
#include <string_view>

namespace air {

/// How resolve_spec names a value's place in messages ("--rdzv-conf", "job.yaml:3:1: rdzv_conf").
using PlaceOf = std::function<std::string(const Origin&, std::string_view key)>;

/// Checks and settles the torchrun rendezvous keys once every source is
/// applied: the backend is static or c10d (anything else is named as
/// unsupported); standalone means c10d on one node; rdzv_conf's
/// join_timeout, last_call_timeout and read_timeout (seconds, as torchrun)
/// fill the spec's timeouts; rdzv_id becomes the run id unless run_id is
/// given; a static endpoint HOST:PORT becomes master_addr and master_port;
/// nnodes MIN:MAX needs c10d; c10d on several nodes needs an endpoint.
/// Pure; errors are usage errors naming the key's place.
Status settle_rendezvous(LaunchSpec& spec, const PlaceOf& place);

/// Whether master_addr is the rendezvous host that settle_rendezvous chose for
/// one node under c10d ("localhost" for standalone), not an address the user
/// gave. The launcher then gives the ranks this host's fully qualified name,
/// as torchrun's c10d rendezvous does; the rendezvous host stays where air-run
/// binds and connects.
bool master_addr_from_one_node_c10d(const LaunchSpec& spec);

} // namespace air
