#pragma once

#include "core/base/error.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace air {

/// How deeply a spec file may nest lists and mappings. A spec nests three
/// levels (`environment: dependencies: [...]`); text nested thousands deep is
/// a bomb whose parse costs seconds, refused at the first level past this.
inline constexpr std::size_t k_max_yaml_depth = 64;

/// Checks that `text` is well-formed YAML before yaml-cpp builds its tree.
/// yaml-cpp accepts some text that a conforming parser refuses (an unclosed
/// quote swallows the lines after it, a stray token becomes a value); libyaml,
/// the parser behind PyYAML, refuses it. Every event of the stream is read, so
/// an error anywhere is found, an alias must name an anchor defined before it,
/// and lists and mappings nest at most `k_max_yaml_depth` levels.
/// The error (usage kind) names the place: "job.yaml:3:1: invalid YAML: found
/// unexpected end of stream (while scanning a quoted scalar that starts at 1:10)".
/// Without libyaml at build time (a host lacking libyaml-dev) it accepts
/// everything and yaml-cpp's own checks are all there is.
Status check_yaml_syntax(std::string_view text, const std::string& file);

/// Whether `check_yaml_syntax` is the strict check (air-run was built with libyaml).
bool yaml_syntax_is_strict();

} // namespace air
