#include "core/pyenv/pip_progress.hpp"

#include "core/base/text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace air {

namespace {

/// The first blank-separated word of `text`.
std::string_view first_word(std::string_view text) {
  text = trim(text);
  return text.substr(0, std::min(text.find(' '), text.size()));
}

/// The last path component of `path` ("./wheels/x.whl" -> "x.whl").
std::string_view base_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// Entries of pip's comma-separated package lists ("a, b, c" -> 3).
std::size_t list_length(std::string_view list) {
  list = trim(list);
  if (list.empty()) return 0;
  return static_cast<std::size_t>(std::count(list.begin(), list.end(), ',')) + 1;
}

std::string plural_packages(std::size_t n) { return fmt::format("{} package{}", n, n == 1 ? "" : "s"); }

/// Whether `line` starts with `prefix`; if so, `rest` is what follows it.
bool after(std::string_view line, std::string_view prefix, std::string_view& rest) {
  if (!line.starts_with(prefix)) return false;
  rest = line.substr(prefix.size());
  return true;
}

} // namespace

BuildDisplay choose_build_display(bool stderr_is_tty, const Environment& env) {
  if (env_or(env, "GITHUB_ACTIONS") == "true" || env_or(env, "GITLAB_CI") == "true")
    return BuildDisplay::ci_group;
  if (stderr_is_tty && env_or(env, "CI").empty()) return BuildDisplay::live_line;
  return BuildDisplay::one_line;
}

CiGroup ci_group_lines(const Environment& env, std::string_view name, std::string_view title, long long now) {
  if (env_or(env, "GITHUB_ACTIONS") == "true")
    return {fmt::format("::group::{}\n", title), std::string("::endgroup::\n")};
  if (env_or(env, "GITLAB_CI") == "true") {
    // GitLab's collapsible sections: ESC[0K clears what the marker line would
    // otherwise leave visible; the header text follows the carriage return.
    return {fmt::format("\x1b[0Ksection_start:{}:{}[collapsed=true]\r\x1b[0K{}\n", now, name, title),
            fmt::format("\x1b[0Ksection_end:{}:{}\r\x1b[0K\n", now, name)};
  }
  return {};
}

bool PipProgress::take(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const Phase old_phase = phase_;
  const std::string old_subject = subject_;
  const std::size_t old_collected = collected_;
  std::string_view rest;
  // Indented lines are the sub-steps of the package named on the line above.
  const bool indented = line.starts_with(' ');
  const std::string_view text = trim(line);
  if (!indented && after(text, "Collecting ", rest)) {
    phase_ = Phase::collecting;
    subject_ = std::string(first_word(rest));
    ++collected_;
  } else if (!indented && after(text, "Processing ", rest)) {
    phase_ = Phase::collecting;
    subject_ = std::string(base_name(first_word(rest)));
    ++collected_;
  } else if (!indented && after(text, "Requirement already satisfied: ", rest)) {
    phase_ = Phase::collecting;
    subject_ = std::string(first_word(rest));
    ++collected_;
  } else if (after(text, "Downloading ", rest) || after(text, "Using cached ", rest)) {
    phase_ = Phase::downloading;
    subject_ = std::string(trim(rest));
  } else if (after(text, "Building wheels for collected packages: ", rest)) {
    phase_ = Phase::building;
    subject_ = std::string(trim(rest));
  } else if (after(text, "Building wheel for ", rest)) {
    phase_ = Phase::building;
    subject_ = std::string(first_word(rest));
  } else if (after(text, "Installing collected packages: ", rest)) {
    phase_ = Phase::installing;
    installing_ = list_length(rest);
    subject_.clear();
  } else if (after(text, "Successfully installed ", rest)) {
    phase_ = Phase::done;
    installing_ = static_cast<std::size_t>(std::count(rest.begin(), rest.end(), ' ')) + 1;
    subject_.clear();
  }
  return phase_ != old_phase || subject_ != old_subject || collected_ != old_collected;
}

std::string PipProgress::status() const {
  switch (phase_) {
  case Phase::starting:
    return "starting pip";
  case Phase::collecting:
    return fmt::format("collecting {} ({} so far)", subject_, plural_packages(collected_));
  case Phase::downloading:
    return fmt::format("downloading {}", subject_);
  case Phase::building:
    return fmt::format("building wheel for {}", subject_);
  case Phase::installing:
    return fmt::format("installing {}", plural_packages(installing_));
  case Phase::done:
    return fmt::format("installed {}", plural_packages(installing_));
  }
  return {};
}

std::string build_status_line(std::string_view key12, std::string_view count, std::string_view doing,
                              double elapsed_s, std::size_t width) {
  std::string line =
      fmt::format("air-run: building environment {} ({}): {}, {:.0f} s", key12, count, doing, elapsed_s);
  // One column short of the width: writing the last column makes some
  // terminals wrap at once, and the line could no longer be redrawn in place.
  const std::size_t limit = width > 1 ? width - 1 : width;
  if (line.size() > limit) {
    std::size_t cut = limit;
    while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut; // whole UTF-8 characters
    line.resize(cut);
  }
  return line;
}

} // namespace air
