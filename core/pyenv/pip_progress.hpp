#pragma once

// What an environment build shows while pip runs: pip's many lines condensed
// into one status (what it does now, with which package, how many packages so
// far), and the ways that status reaches the user. Pure: lines in, text out.

#include "core/base/environment.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace air {

/// How an environment build is shown, chosen once per build:
///  - live_line: stderr is a terminal outside CI: one line redrawn in place
///    (package, count, elapsed), cleared when the build ends;
///  - ci_group: GitHub Actions or GitLab CI: pip's whole output inside a
///    collapsible group of the job log, so it is there when needed and folded
///    away when not;
///  - one_line: anywhere else (a log file, a pipe): "building ... done in N s"
///    and the path of the build log.
enum class BuildDisplay { live_line, ci_group, one_line };

/// Picks the display: ci_group when GITHUB_ACTIONS=true or GITLAB_CI=true,
/// live_line on a terminal (unless CI is set), one_line otherwise.
BuildDisplay choose_build_display(bool stderr_is_tty, const Environment& env);

/// The lines that open and close a collapsible group around `title` in the
/// job log of the CI system `env` names: `::group::` / `::endgroup::` on GitHub
/// Actions; GitLab's `section_start` / `section_end` markers (with the Unix
/// time `now`, which GitLab shows as the section's duration). Each ends with a
/// newline. Empty strings outside those two.
struct CiGroup {
  std::string open;
  std::string close;
};
CiGroup ci_group_lines(const Environment& env, std::string_view name, std::string_view title, long long now);

/// Follows pip's output one line at a time and keeps what it is doing now.
/// Understands the lines pip (20 and later) prints without a terminal:
/// "Collecting X", "Processing ./x.whl", "Requirement already satisfied: X",
/// "  Downloading x.whl (2 MB)", "  Using cached x.whl", "Building wheels for
/// collected packages: ...", "  Building wheel for X ...", "Installing collected
/// packages: a, b" and "Successfully installed ...". Other lines leave the
/// status as it was, so an unknown pip version still shows something true.
class PipProgress {
public:
  /// Takes one line of pip's output (either stream, without its newline).
  /// Returns whether the status changed.
  bool take(std::string_view line);

  /// The status in a few words: "collecting numpy (3 packages so far)",
  /// "downloading numpy-1.26.4-cp311-...whl (18.2 MB)", "installing 12 packages",
  /// "building wheel for foo", "installed 12 packages", "starting pip".
  std::string status() const;

  /// Packages pip has collected (found a distribution for) so far.
  std::size_t collected() const { return collected_; }

  /// Whether no line pip prints while working has come yet.
  bool idle() const { return phase_ == Phase::starting; }

private:
  enum class Phase { starting, collecting, downloading, building, installing, done };
  Phase phase_ = Phase::starting;
  std::string subject_;        ///< the package or file the phase is about
  std::size_t collected_ = 0;  ///< packages collected so far
  std::size_t installing_ = 0; ///< packages in "Installing collected packages"
};

/// The live line of a build: "air-run: building environment 3f2a1b9c0d4e
/// (5 requirements): collecting numpy (3 packages so far), 12 s", where
/// `doing` is what the build does now (PipProgress::status, or the step
/// before pip's first line), cut to `width` columns (a longer line would wrap
/// and could not be redrawn in place).
std::string build_status_line(std::string_view key12, std::string_view count, std::string_view doing,
                              double elapsed_s, std::size_t width);

} // namespace air
