#pragma once

#include "core/report/collect.hpp"

#include <string>
#include <string_view>

namespace air {

/// The run as a JUnit XML report (the Ant format that Jenkins, GitLab and
/// GitHub test-report actions read): one <testsuite name="air-run"> with one
/// <testcase classname="air-run.<run_id>" name="rank N"> per rank.
///  - a rank that failed on its own: <failure message type> holding its
///    traceback (error file) or output tail;
///  - a rank that could not be started: <error type="spawn_error">;
///  - a rank air-run stopped: <error type="timed_out"|"interrupted"> when the
///    whole run timed out or was interrupted, else <skipped> (another rank failed);
///  - every testcase carries its output tail in <system-out>;
///  - a refused launch (no ranks) is one <testcase name="launch"> with a
///    <failure type="launch_refused_<kind>"> holding the error.
/// The timestamp is UTC without a zone suffix, as Ant writes it. Text is
/// escaped for XML 1.0 (see xml_escape). Pure.
std::string junit_xml(const RunReport& report);

/// Escapes text for XML 1.0 character data (`attribute` = false) or a quoted
/// attribute value (`attribute` = true, which also escapes quotes, tab, CR and
/// LF so attribute normalisation cannot fold them). Invalid UTF-8 and
/// characters XML 1.0 forbids (C0 controls other than tab/LF/CR, U+FFFE,
/// U+FFFF) become U+FFFD; ANSI colour sequences (ESC [ ... letter) are dropped.
std::string xml_escape(std::string_view text, bool attribute);

} // namespace air
