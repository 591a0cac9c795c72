#pragma once

#include "core/base/error.hpp"

#include <string>

namespace air {

/// Where one node of one run writes its logs (and result files): `folder`
/// (the run's folder under --log-dir, `logs/<run id>`) when no other air-run
/// has used it for this node, else the first free `folder.1`, `folder.2`, ...
/// So a run id used again, or by two runs at the same time, never truncates
/// or deletes another run's files: the later run gets a folder of its own.
///
/// A folder belongs to node N of a run once that node created its marker
/// `.air-run-node<N>` there (O_EXCL, so two runs starting together cannot
/// both take it); the marker is left for good and says which process wrote
/// the folder. Several nodes of one run share a folder (one marker each) on
/// a shared file system. Errors name the call and the path; after 1000 taken
/// folders the run is refused (usage error).
Expected<std::string> claim_run_folder(const std::string& folder, int node_rank);

} // namespace air
