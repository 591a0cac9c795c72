// Values of torchrun 2.11's newest flags: NUMA binding modes, signal names,
// duplicate-output filters.
#include "core/spec/torchrun_values.hpp"

#include "core/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <utility>

namespace air {
namespace {

constexpr std::array<std::pair<std::string_view, NumaMode>, 5> k_numa_modes{{
    {"none", NumaMode::none},
    {"node", NumaMode::node},
    {"socket", NumaMode::socket},
    {"exclusive", NumaMode::exclusive},
    {"core-complex", NumaMode::core_complex},
}};

// The signals --signals-to-handle may name: those the supervisor's signalfd
// already carries (core/os/signals.cpp). SIGCHLD and SIGWINCH are air-run's own.
constexpr std::array<std::pair<std::string_view, int>, 6> k_signals{{
    {"SIGHUP", SIGHUP},
    {"SIGINT", SIGINT},
    {"SIGQUIT", SIGQUIT},
    {"SIGTERM", SIGTERM},
    {"SIGUSR1", SIGUSR1},
    {"SIGUSR2", SIGUSR2},
}};

std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> items;
  while (true) {
    const std::size_t comma = text.find(',');
    items.push_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return items;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

} // namespace

Expected<NumaMode> parse_numa_mode(std::string_view text, std::string_view what) {
  for (const auto& [name, mode] : k_numa_modes)
    if (name == text) return mode;
  return usage_error(fmt::format("{}: expected node, socket, exclusive, core-complex or none, got {}", what,
                                 single_quoted(text)));
}

std::string_view numa_mode_name(NumaMode mode) {
  for (const auto& [name, m] : k_numa_modes)
    if (m == mode) return name;
  return "none";
}

Expected<std::vector<int>> parse_signal_list(std::string_view text, std::string_view what) {
  std::vector<int> out;
  for (const std::string_view raw : split_commas(text)) {
    const std::string_view item = trimmed(raw); // torchrun strips each name too
    const auto it =
        std::find_if(k_signals.begin(), k_signals.end(), [&](const auto& s) { return s.first == item; });
    if (it == k_signals.end()) {
      std::string hint;
      const std::string with_sig = "SIG" + std::string(item);
      for (const auto& s : k_signals)
        if (s.first == with_sig) hint = fmt::format(" (did you mean {}?)", with_sig);
      return usage_error(fmt::format("{}: {} is not a signal air-run forwards{}; use SIG names from "
                                     "SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, comma separated",
                                     what, single_quoted(item), hint));
    }
    if (std::find(out.begin(), out.end(), it->second) == out.end()) out.push_back(it->second);
  }
  return out;
}

std::vector<std::string> parse_filter_list(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  for (const std::string_view item : split_commas(text))
    if (!item.empty()) out.emplace_back(item);
  return out;
}

} // namespace air
