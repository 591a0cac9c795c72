#pragma once

#include "core/base/error.hpp"

#include <string>
#include <string_view>

namespace air {

/// Checks that `text` is well-formed YAML before yaml-cpp builds its tree.
/// yaml-cpp accepts some text that a conforming parser refuses (an unclosed
/// quote swallows the lines after it, a stray token becomes a value); libyaml,
/// the parser behind PyYAML, refuses it. Every event of the stream is read, so
/// an error anywhere is found, and an alias must name an anchor defined before it.
/// The error (usage kind) names the place: "job.yaml:3:1: invalid YAML: found
/// unexpected end of stream (while scanning a quoted scalar that starts at 1:10)".
/// Without libyaml at build time (a host lacking libyaml-dev) it accepts
/// everything and yaml-cpp's own checks are all there is.
Status check_yaml_syntax(std::string_view text, const std::string& file);

/// Whether `check_yaml_syntax` is the strict check (air-run was built with libyaml).
bool yaml_syntax_is_strict();

} // namespace air
