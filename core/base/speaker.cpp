// Who speaks on air-run's console: the node's name on air-run's own lines.
#include "core/base/speaker.hpp"

#include <atomic>
#include <cstdio>

namespace air {
namespace {

constexpr std::string_view k_name = "air-run";

/// The node set_console_node() gave; one node until then. Atomic: MLflow's
/// thread may print while the launch learns its node (a c10d join).
std::atomic<int> g_node_rank{0};
std::atomic<int> g_num_nodes{1};

/// Whether `line` is one of air-run's own without a node: "air-run:" or
/// "air-run " first, not "air-run (node".
bool unnamed_own_line(std::string_view line) {
  if (line.substr(0, k_name.size()) != k_name || line.size() == k_name.size()) return false;
  const std::string_view rest = line.substr(k_name.size());
  if (rest[0] == ':') return true;
  return rest[0] == ' ' && rest.substr(0, 6) != " (node";
}

} // namespace

std::string air_run_name(int node_rank, int num_nodes) {
  if (num_nodes <= 1) return std::string(k_name);
  return std::string(k_name) + " (node " + std::to_string(node_rank) + ")";
}

std::string name_node(std::string_view text, int node_rank, int num_nodes) {
  if (num_nodes <= 1) return std::string(text);
  const std::string name = air_run_name(node_rank, num_nodes);
  std::string out;
  out.reserve(text.size() + 16);
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end == std::string_view::npos ? text.size() : end + 1);
    if (unnamed_own_line(line)) {
      out += name;
      out += line.substr(k_name.size());
    } else {
      out += line;
    }
    text.remove_prefix(line.size());
  }
  return out;
}

void set_console_node(int node_rank, int num_nodes) {
  g_node_rank = node_rank;
  g_num_nodes = num_nodes;
}

std::string said(std::string_view text) { return name_node(text, g_node_rank, g_num_nodes); }

std::string air_run_says() { return air_run_name(g_node_rank, g_num_nodes) + ": "; }

void say_on_stderr(std::string_view text) { std::fputs(said(text).c_str(), stderr); }

} // namespace air
