#include "core/spec/ignored_settings.hpp"

#include <array>

namespace air {
namespace {

// What core/run/plan.cpp sets for each rank, over the spec's env (a unit test,
// "every launcher variable is one make_plan overrides", checks them).
constexpr std::array<std::string_view, 23> k_launcher_variables{
    "RANK",
    "LOCAL_RANK",
    "ROLE_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "NODE_RANK",
    "NUM_NODES",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_ERROR_FILE",
    "TORCHELASTIC_USE_AGENT_STORE",
    "PYTHONUNBUFFERED",
    "AIR_RUN_ID",
    "AIR_RESULT_FILE",
    "AIR_ACCELERATOR_TYPE",
    "AIR_NUM_ACCELERATORS",
};

constexpr const char k_warning[] = "air-run: warning: ";

/// Where a setting came from, as a message starts: "--ranks", "AIR_RUN_CONSOLE_RANKS",
/// "job.yaml:4:1: console_ranks".
std::string place(const Origin& origin, std::string_view key) {
  switch (origin.kind) {
  case Origin::Kind::file:
    return origin.where + ": " + std::string(key);
  case Origin::Kind::env:
  case Origin::Kind::flag:
    return origin.where.empty() ? std::string(key) : origin.where;
  case Origin::Kind::default_value:
    break;
  }
  return std::string(key);
}

/// "rank 5 is" / "ranks 5,7 are".
std::string ranks_phrase(const std::vector<int>& ranks, std::string_view what) {
  return ranks.size() == 1 ? std::string(what) + " " + format_rank_list(ranks) + " is"
                           : std::string(what) + "s " + format_rank_list(ranks) + " are";
}

/// The warning for a rank filter naming ranks outside 0..count-1; "" when none does.
std::string filter_warning(const Setting<std::vector<int>>& filter, std::string_view key, int count,
                           std::string_view what, std::string_view where) {
  std::vector<int> missing;
  for (const int rank : filter.value) {
    if (rank >= count) missing.push_back(rank);
  }
  if (missing.empty()) return {};
  std::string line = k_warning + place(filter.origin, key) + ": " + ranks_phrase(missing, what) + " not " +
                     std::string(where) + " (" + std::string(what) + "s " +
                     (count == 1 ? "0" : "0-" + std::to_string(count - 1)) + ")";
  if (missing.size() == filter.value.size()) line += "; no rank's output is shown";
  return line;
}

} // namespace

std::span<const std::string_view> launcher_variables() { return k_launcher_variables; }

std::vector<std::string> ignored_settings_warnings(const LaunchSpec& spec, int world_size,
                                                   int ranks_per_node) {
  std::vector<std::string> lines;
  if (auto line = filter_warning(spec.console_ranks, "console_ranks", world_size, "rank", "in this run");
      !line.empty())
    lines.push_back(std::move(line));
  if (auto line = filter_warning(spec.local_ranks_filter, "local_ranks_filter", ranks_per_node, "local rank",
                                 "on this node");
      !line.empty())
    lines.push_back(std::move(line));
  for (const std::string_view name : k_launcher_variables) {
    const auto it = spec.env.value.find(std::string(name));
    if (it == spec.env.value.end()) continue;
    lines.push_back(k_warning + place(spec.env.origin, "env") + ": " + std::string(name) + "=" + it->second +
                    " is ignored: air-run sets " + std::string(name) + " for each rank itself");
  }
  return lines;
}

} // namespace air
