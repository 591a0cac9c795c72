#include "core/pyenv/build_view.hpp"

#include "core/base/speaker.hpp"

#include <fmt/format.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <utility>

namespace air {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view k_group_name = "air_run_env_build";

void put(const std::string& text) {
  std::fputs(said(text).c_str(), stderr);
  std::fflush(stderr);
}

/// The terminal's width in columns; 80 when it cannot be asked.
std::size_t terminal_width() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

} // namespace

BuildView::BuildView(const Environment& env, bool stderr_is_tty, bool quiet, std::string key12,
                     std::string count, std::string prefix)
    : display_(choose_build_display(stderr_is_tty, env)), quiet_(quiet), env_(env), key12_(std::move(key12)),
      count_(std::move(count)), prefix_(std::move(prefix)), started_at_(Clock::now()) {}

void BuildView::started() {
  if (quiet_) return;
  switch (display_) {
  case BuildDisplay::live_line:
    draw(true);
    break;
  case BuildDisplay::ci_group: {
    const auto title = fmt::format("air-run: building environment {} ({}) in {}", key12_, count_, prefix_);
    put(ci_group_lines(env_, k_group_name, title, std::time(nullptr)).open);
    group_open_ = true;
    break;
  }
  case BuildDisplay::one_line:
    put(fmt::format("air-run: building environment {} ({}) ... ", key12_, count_));
    break;
  }
}

void BuildView::step(std::string what) {
  step_ = std::move(what);
  if (!quiet_ && display_ == BuildDisplay::live_line) draw(true);
}

void BuildView::line(std::string_view text) {
  if (quiet_) return;
  if (display_ == BuildDisplay::ci_group) {
    put(std::string(text) + "\n");
  } else if (display_ == BuildDisplay::live_line && progress_.take(text)) {
    draw(false);
  }
}

void BuildView::tick() {
  if (!quiet_ && display_ == BuildDisplay::live_line) draw(true);
}

void BuildView::draw(bool force) {
  const auto now = Clock::now();
  // pip prints dozens of lines a second when packages are cached: a few
  // redraws a second are all a reader can follow.
  if (!force && line_shown_ && now - drawn_at_ < std::chrono::milliseconds(100)) return;
  const double elapsed = std::chrono::duration<double>(now - started_at_).count();
  const std::string doing = progress_.idle() ? step_ : progress_.status();
  put("\r\x1b[2K" + build_status_line(key12_, count_, doing, elapsed, terminal_width()));
  drawn_at_ = now;
  line_shown_ = true;
}

void BuildView::end_live_line() {
  if (line_shown_) put("\r\x1b[2K");
  line_shown_ = false;
}

void BuildView::close_group() {
  if (!group_open_) return;
  put(ci_group_lines(env_, k_group_name, "", std::time(nullptr)).close);
  group_open_ = false;
}

void BuildView::succeeded(double seconds, const std::string& log_path) {
  if (quiet_) return;
  switch (display_) {
  case BuildDisplay::live_line:
    end_live_line();
    put(fmt::format("air-run: environment {} ready in {:.1f} s ({}; log: {})\n", key12_, seconds, count_,
                    log_path));
    break;
  case BuildDisplay::ci_group:
    close_group();
    put(fmt::format("air-run: environment {} ready in {:.1f} s (log: {})\n", key12_, seconds, log_path));
    break;
  case BuildDisplay::one_line:
    put(fmt::format("done in {:.1f} s (log: {})\n", seconds, log_path));
    break;
  }
}

void BuildView::failed() {
  if (quiet_) return;
  end_live_line();
  close_group();
  if (display_ == BuildDisplay::one_line) put("failed\n");
}

void BuildView::interrupted(int sig) {
  end_live_line();
  close_group();
  const bool mid_line = !quiet_ && display_ == BuildDisplay::one_line;
  put(fmt::format("{}air-run: environment build interrupted by signal {}; nothing was kept\n",
                  mid_line ? "\n" : "", sig));
}

} // namespace air
