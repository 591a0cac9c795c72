#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

// The text of the live status area that air-run keeps under the scrolling
// rank output on a terminal: how many ranks run, how long the run has gone and
// has left, and what each GPU is doing. Pure: the terminal side (when to draw,
// where the cursor is) lives in core/run/live_view.hpp.

namespace air {

/// What is known about one GPU at the last reading. NVML fills every field;
/// fake GPUs (AIR_RUN_FAKE_GPUS) know only their index and total memory.
struct LiveGpu {
  int index = 0;
  std::optional<unsigned> utilization_pct;
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<std::uint64_t> memory_total_bytes;
  std::optional<unsigned> temperature_c;
};

/// One moment of the run, as the status area shows it.
struct LiveSnapshot {
  int running = 0;
  int exited = 0; ///< ended with status 0
  int failed = 0; ///< ended otherwise (or could not start)
  double elapsed_s = 0;
  std::optional<double> left_s;     ///< time before the timeout; nullopt without one
  std::optional<double> stopping_s; ///< while stopping: time before SIGKILL
  /// Training steps: the ranks' median count and its rate per second
  /// (core/run/progress_watch.hpp); nullopt before any rank counted one.
  std::optional<std::uint64_t> steps;
  std::optional<double> steps_per_s;
  std::vector<LiveGpu> gpus;
};

/// The status area's lines for a terminal `width` columns wide. Every line is
/// shorter than `width` (a full line would wrap and break the redraw); the
/// first says ranks and times, the next ones (at most `max_gpu_lines`) pack
/// the GPUs, "+N more" when they do not fit. `color`: dim text, failures in red.
std::vector<std::string> render_live_status(const LiveSnapshot& snapshot, int width, bool color,
                                            int max_gpu_lines = 3);

/// "1:02:03" or "02:03": a clock-style duration, whole seconds.
std::string clock_text(double seconds);

/// The escape sequence that erases a status area of `lines` lines drawn by
/// `draw_text` and leaves the cursor at the start of its first line.
std::string erase_text(std::size_t lines);

/// The status lines as written to the terminal: joined by newlines, no
/// newline after the last, so the cursor stays on the area's last line.
std::string draw_text(const std::vector<std::string>& lines);

} // namespace air
