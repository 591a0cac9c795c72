#pragma once

#include "core/base/error.hpp"
#include "core/run/plan.hpp"

#include <optional>
#include <string>

namespace air {

/// The commit record air.data writes last into a checkpoint directory
/// (python/air/data/_checkpoint.py), and DCP's metadata file.
inline constexpr std::string_view k_checkpoint_marker = ".air-checkpoint";
inline constexpr std::string_view k_checkpoint_metadata = ".metadata";

/// The newest complete checkpoint under `root`, by air.data's rule (the
/// same as `air.data.latest(root)`): a subdirectory whose name does not start
/// with '.', holding a regular file `.metadata` and a `.air-checkpoint` JSON
/// object whose `sequence` is an integer; the highest sequence wins, then the
/// greatest name. nullopt when there is none or `root` cannot be read. The
/// two are tested against the same trees (tests/data/checkpoint_trees.json).
std::optional<std::string> latest_checkpoint(const std::string& root);

/// Makes checkpoint_dir absolute (relative to the working directory; a spec
/// file's own relative paths were anchored to it already) and, when
/// `create`, creates the directory: ranks on every attempt and every node
/// get the same path. Errors: usage (exit 2), naming the key's origin.
Status prepare_checkpoint_dir(Setting<std::string>& dir, bool create);

/// Decides what the attempt about to start resumes from: with a checkpoint
/// directory, every rank's AIR_RESUME_FROM is the latest complete checkpoint
/// (removed when there is none), also in `plan.resume_from`. Reads the
/// directory; does nothing without one.
void choose_resume_point(LaunchPlan& plan);

} // namespace air
