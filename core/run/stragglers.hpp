#pragma once

#include "core/run/console.hpp"
#include "core/run/progress_watch.hpp"
#include "core/run/rank_table.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace air {

class NvmlLibrary;

/// Straggler explanation: every few seconds names the ranks whose steps
/// fall behind (core/run/progress_watch.hpp) with what may explain it on a
/// GPU: its clocks, the reasons the driver holds them down, temperature and
/// power, read through NVML when the rank is first named.
class Stragglers {
public:
  using Clock = std::chrono::steady_clock;

  explicit Stragglers(const RankTable& ranks);
  ~Stragglers();
  Stragglers(const Stragglers&) = delete;
  Stragglers& operator=(const Stragglers&) = delete;

  /// The lines naming new stragglers, at most every 2 s (none before then).
  ConsoleBatch tick(ProgressWatch& progress, Clock::time_point now);
  /// Names the last ones at the end of the run (their lines are not shown).
  void finish(ProgressWatch& progress);

private:
  /// What may explain a straggler at rank index `index`; "" for a CPU rank
  /// or without NVML (opened when a GPU rank is first named, once).
  std::string explain(std::size_t index);

  const RankTable& ranks_;
  Clock::time_point next_check_{};
  std::unique_ptr<NvmlLibrary> nvml_;
  bool nvml_tried_ = false;
};

} // namespace air
