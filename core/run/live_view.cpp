#include "core/run/live_view.hpp"

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

/// The area's text changes at most this often (4 times a second).
constexpr auto k_render_interval = std::chrono::milliseconds(250);
/// NVML is asked at most this often: its utilisation is itself an average
/// over the driver's sample period, and every query costs a driver call.
constexpr auto k_sample_interval = std::chrono::seconds(1);

/// The terminal's width, 80 when it does not say.
int terminal_width(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

/// Whether `a` and `b` are the same terminal device.
bool same_terminal(int a, int b) {
  if (::isatty(a) != 1 || ::isatty(b) != 1) return false;
  struct stat sa {};
  struct stat sb {};
  if (::fstat(a, &sa) != 0 || ::fstat(b, &sb) != 0) return false;
  return sa.st_rdev == sb.st_rdev;
}

} // namespace

bool live_view_wanted(bool asked, bool stderr_is_tty, const Environment& env) {
  return asked && stderr_is_tty && env_or(env, "CI").empty() && env_or(env, "NO_COLOR").empty() &&
         env_or(env, "TERM") != "dumb";
}

LiveView::LiveView(int fd, int stdout_fd, std::vector<LiveGpuSource> gpus, bool nvml, bool color)
    : fd_(fd), stdout_fd_(stdout_fd), color_(color), sources_(std::move(gpus)), use_nvml_(nvml) {
  stdout_shared_ = stdout_fd_ == fd_ || same_terminal(fd_, stdout_fd_);
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

std::string LiveView::tick(Clock::time_point now, LiveSnapshot snapshot) {
  if (closed_ || now < next_render_) return {};
  next_render_ = now + k_render_interval;
  if (now >= next_sample_) sample(now);
  snapshot.gpus = gpus_;
  const auto lines = render_live_status(snapshot, terminal_width(fd_), color_);
  std::string text = draw_text(lines);
  if (text == text_ && drawn_lines_ == lines.size()) return {};
  std::string out = erase();
  text_ = std::move(text);
  lines_ = lines.size();
  out += redraw();
  return out;
}

std::string LiveView::close() {
  if (closed_) return {};
  closed_ = true;
  std::string out = erase();
  drawn_lines_ = 0;
  lines_ = 0;
  text_.clear();
  return out;
}

} // namespace air
