// pip's output condensed to one status line, and how a build is shown where.
#include "core/pyenv/pip_progress.hpp"
#include "tests/unit/catch.hpp"

#include <string>
#include <vector>

namespace {

/// Feeds `lines` and returns the status after each one.
std::vector<std::string> statuses(air::PipProgress& progress, const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const auto& line : lines) {
    progress.take(line);
    out.push_back(progress.status());
  }
  return out;
}

} // namespace

TEST_CASE("pip progress: a download from an index, line by line", "[pyenv][pip]") {
  air::PipProgress progress;
  CHECK(progress.status() == "starting pip");
  CHECK(progress.idle());
  const auto seen =
      statuses(progress, {
                             "Collecting numpy==1.26.4 (from -r /tmp/req.txt (line 1))",
                             "  Downloading numpy-1.26.4-cp311-cp311-manylinux_x86_64.whl (18.2 MB)",
                             "Collecting six",
                             "  Using cached six-1.16.0-py2.py3-none-any.whl (11 kB)",
                             "Requirement already satisfied: packaging in /usr/lib/python3/dist-packages",
                             "Building wheels for collected packages: tiny",
                             "  Building wheel for tiny (pyproject.toml) ... done",
                             "Installing collected packages: six, numpy, tiny",
                             "Successfully installed numpy-1.26.4 six-1.16.0 tiny-0.1",
                         });
  CHECK(seen == std::vector<std::string>{
                    "collecting numpy==1.26.4 (1 package so far)",
                    "downloading numpy-1.26.4-cp311-cp311-manylinux_x86_64.whl (18.2 MB)",
                    "collecting six (2 packages so far)",
                    "downloading six-1.16.0-py2.py3-none-any.whl (11 kB)",
                    "collecting packaging (3 packages so far)",
                    "building wheel for tiny",
                    "building wheel for tiny",
                    "installing 3 packages",
                    "installed 3 packages",
                });
  CHECK(progress.collected() == 3);
  CHECK_FALSE(progress.idle());
}

TEST_CASE("pip progress: local wheels, CR line ends, and lines it does not know", "[pyenv][pip]") {
  air::PipProgress progress;
  CHECK_FALSE(progress.take("Looking in links: /work/wheels"));
  CHECK(progress.take("Processing ./wheels/airtestpkg-1.0-py3-none-any.whl\r"));
  CHECK(progress.status() == "collecting airtestpkg-1.0-py3-none-any.whl (1 package so far)");
  // An indented Processing line is a sub-step of the package above: not a second package.
  CHECK_FALSE(progress.take("  Processing ./wheels/airtestpkg-1.0-py3-none-any.whl"));
  CHECK(progress.collected() == 1);
  CHECK_FALSE(progress.take("WARNING: something pip says"));
  CHECK_FALSE(progress.take(""));
  CHECK(progress.status() == "collecting airtestpkg-1.0-py3-none-any.whl (1 package so far)");
  CHECK(progress.take("Installing collected packages: airtestpkg"));
  CHECK(progress.status() == "installing 1 package");
}

TEST_CASE("pip progress: the live line fits the terminal", "[pyenv][pip]") {
  air::PipProgress progress;
  progress.take("Collecting numpy");
  CHECK(air::build_status_line("3f2a1b9c0d4e", "2 requirements", progress.status(), 12.4, 200) ==
        "air-run: building environment 3f2a1b9c0d4e (2 requirements): collecting numpy (1 package so far), "
        "12 s");
  const std::string cut =
      air::build_status_line("3f2a1b9c0d4e", "2 requirements", progress.status(), 12.4, 40);
  CHECK(cut == "air-run: building environment 3f2a1b9c0");
  CHECK(cut.size() == 39); // one column short: writing the last column can wrap
  // A cut never splits a UTF-8 character.
  air::PipProgress accented;
  accented.take("Collecting caf\xc3\xa9");
  const std::string line = air::build_status_line("k", "1 requirement", accented.status(), 0, 200);
  const std::size_t e_at = line.find("\xc3\xa9");
  REQUIRE(e_at != std::string::npos);
  CHECK(air::build_status_line("k", "1 requirement", accented.status(), 0, e_at + 2) == line.substr(0, e_at));
}

TEST_CASE("pip progress: where a build is shown", "[pyenv][pip]") {
  using air::BuildDisplay;
  CHECK(air::choose_build_display(true, {}) == BuildDisplay::live_line);
  CHECK(air::choose_build_display(false, {}) == BuildDisplay::one_line);
  CHECK(air::choose_build_display(true, {{"CI", "true"}}) == BuildDisplay::one_line);
  CHECK(air::choose_build_display(false, {{"GITHUB_ACTIONS", "true"}}) == BuildDisplay::ci_group);
  CHECK(air::choose_build_display(true, {{"GITLAB_CI", "true"}}) == BuildDisplay::ci_group);

  const auto github = air::ci_group_lines({{"GITHUB_ACTIONS", "true"}}, "env", "building x", 1700000000);
  CHECK(github.open == "::group::building x\n");
  CHECK(github.close == "::endgroup::\n");
  const auto gitlab = air::ci_group_lines({{"GITLAB_CI", "true"}}, "env", "building x", 1700000000);
  CHECK(gitlab.open == "\x1b[0Ksection_start:1700000000:env[collapsed=true]\r\x1b[0Kbuilding x\n");
  CHECK(gitlab.close == "\x1b[0Ksection_end:1700000000:env\r\x1b[0K\n");
  const auto none = air::ci_group_lines({}, "env", "building x", 1700000000);
  CHECK(none.open.empty());
  CHECK(none.close.empty());
}
