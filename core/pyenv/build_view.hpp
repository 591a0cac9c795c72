#pragma once

// Shows one environment build on stderr, in the way BuildDisplay says: a live
// line on a terminal, a collapsible group in CI, one line elsewhere.

#include "core/base/environment.hpp"
#include "core/pyenv/pip_progress.hpp"

#include <chrono>
#include <string>
#include <string_view>

namespace air {

/// The display of one build, fed by the build as it goes. Every path out of a
/// build (success, failure, signal) ends with exactly one of `succeeded`,
/// `failed` or `interrupted`, which leave the terminal line clear and a CI
/// group closed, so what air-run prints next starts on a clean line.
class BuildView {
public:
  /// `key12` and `count` name the build ("3f2a1b9c0d4e", "5 requirements");
  /// `prefix` is where it is built. `quiet` (-q) shows nothing but a signal.
  BuildView(const Environment& env, bool stderr_is_tty, bool quiet, std::string key12, std::string count,
            std::string prefix);

  /// The build begins: the first line, or the CI group's header.
  void started();
  /// A step of the build begins ("creating the virtual environment", "starting
  /// pip"): the live line says so until pip's own lines say more.
  void step(std::string what);
  /// One line of venv's or pip's output.
  void line(std::string_view text);
  /// About once a second: the live line's clock moves even when pip is quiet.
  void tick();
  /// The environment is published: "air-run: environment <key> ready in N s".
  void succeeded(double seconds, const std::string& log_path);
  /// The build failed; the caller's error message (with pip's last lines) follows.
  void failed();
  /// A signal stopped the build; nothing was kept.
  void interrupted(int sig);

private:
  void draw(bool force);
  void end_live_line();
  void close_group();

  BuildDisplay display_;
  bool quiet_;
  Environment env_;
  std::string key12_, count_, prefix_;
  PipProgress progress_;
  std::string step_ = "starting";
  std::chrono::steady_clock::time_point started_at_, drawn_at_;
  bool group_open_ = false;
  bool line_shown_ = false;
};

} // namespace air
