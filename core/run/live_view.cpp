#include "core/run/live_view.hpp"

#include "core/os/log_sink.hpp"
#include "core/run/terminal_line.hpp"

#include <sys/ioctl.h>

#include <algorithm>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

/// The area's text changes at most this often (4 times a second).
constexpr auto k_render_interval = std::chrono::milliseconds(250);
/// Unfinished rank lines are redrawn at most this often: live to the eye,
/// without a write for every '\r' of a fast progress bar.
constexpr auto k_partial_interval = std::chrono::milliseconds(50);
/// NVML is asked at most this often: its utilisation is itself an average
/// over the driver's sample period, and every query costs a driver call.
constexpr auto k_sample_interval = std::chrono::seconds(1);

/// The terminal's width, 80 when it does not say.
int terminal_width(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

} // namespace

bool live_view_wanted(bool asked, bool stderr_is_tty, const Environment& env) {
  return asked && stderr_is_tty && env_or(env, "CI").empty() && env_or(env, "NO_COLOR").empty() &&
         env_or(env, "TERM") != "dumb";
}

LiveView::LiveView(int fd, int stdout_fd, std::vector<LiveGpuSource> gpus, bool nvml, bool color, bool status)
    : fd_(fd), stdout_fd_(stdout_fd), color_(color), sources_(std::move(gpus)), use_nvml_(nvml),
      status_(status) {
  stdout_shared_ = stdout_fd_ == fd_ || same_waiting_destination(fd_, stdout_fd_);
  width_ = terminal_width(fd_);
  for (const auto& s : sources_) {
    LiveGpu g;
    g.index = s.index;
    if (s.memory_total_bytes > 0) g.memory_total_bytes = s.memory_total_bytes;
    gpus_.push_back(g);
  }
}

void LiveView::sample(Clock::time_point now) {
  next_sample_ = now + k_sample_interval;
  if (!use_nvml_ || sources_.empty()) return;
  if (!nvml_) {
    // Opened lazily, after the ranks were spawned, so that no driver
    // descriptor can leak into them.
    auto lib = NvmlLibrary::open();
    if (!lib) {
      use_nvml_ = false; // show what detection knew
      return;
    }
    nvml_ = std::make_unique<NvmlLibrary>(std::move(*lib));
  }
  for (std::size_t i = 0; i < sources_.size(); ++i) {
    auto reading = nvml_->read_live(sources_[i].uuid);
    if (!reading) continue;
    LiveGpu& g = gpus_[i];
    g.utilization_pct = reading->utilization_pct;
    g.memory_used_bytes = reading->memory_used_bytes;
    if (reading->memory_total_bytes) g.memory_total_bytes = reading->memory_total_bytes;
    g.temperature_c = reading->temperature_c;
  }
}

void LiveView::set_partial(std::size_t key, const std::string& text) {
  if (closed_) return;
  const auto it = partials_.find(key);
  if (text.empty()) {
    if (it == partials_.end()) return;
    partials_.erase(it);
  } else if (it == partials_.end()) {
    partials_.emplace(key, text);
  } else if (it->second != text) {
    it->second = text;
  } else {
    return;
  }
  partials_changed_ = true;
  compose();
}

Clock::time_point LiveView::next_deadline() const {
  auto next = status_ ? next_render_ : Clock::time_point::max();
  if (partials_changed_) next = std::min(next, next_partial_draw_);
  return next;
}

void LiveView::resized() {
  if (closed_) return;
  width_ = terminal_width(fd_);
  compose();
}

/// The area's text from the unfinished lines and the status lines.
void LiveView::compose() {
  std::vector<std::string> lines;
  for (const auto& [key, text] : partials_) lines.push_back(fit_columns(text, width_ - 1));
  lines.insert(lines.end(), status_lines_.begin(), status_lines_.end());
  text_ = draw_text(lines);
  lines_ = lines.size();
}

std::string LiveView::tick(Clock::time_point now, LiveSnapshot snapshot) {
  if (closed_) return {};
  const bool status_due = status_ && now >= next_render_;
  const bool partials_due = partials_changed_ && now >= next_partial_draw_;
  if (!status_due && !partials_due) return {};
  // Read again at most every 50 ms, also where no SIGWINCH reaches air-run.
  const int width = terminal_width(fd_);
  const bool width_changed = width != width_;
  width_ = width;
  if (status_due) {
    next_render_ = now + k_render_interval;
    if (now >= next_sample_) sample(now);
    snapshot.gpus = gpus_;
    status_lines_ = render_live_status(snapshot, width_, color_);
    compose();
  } else if (width_changed) {
    compose();
  }
  if (partials_due) {
    partials_changed_ = false;
    next_partial_draw_ = now + k_partial_interval;
  }
  if (text_ == drawn_text_ && drawn_lines_ == lines_) return {};
  std::string out = erase();
  out += redraw();
  return out;
}

std::string LiveView::close() {
  if (closed_) return {};
  closed_ = true;
  std::string out = erase();
  drawn_lines_ = 0;
  drawn_text_.clear();
  lines_ = 0;
  text_.clear();
  partials_.clear();
  partials_changed_ = false;
  return out;
}

} // namespace air
