#pragma once

#include <CLI/CLI.hpp>

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace air::cli {

/// The heading of the flags that are not spec keys (the keys' own headings are
/// key_group in core/spec/spec.hpp).
inline constexpr std::string_view k_group_other = "Other";

/// Every heading, in the order `--help` and the man page list them.
std::span<const std::string_view> help_groups();

/// `--help` is at most this wide.
inline constexpr std::size_t k_help_width = 100;

/// The usage lines: air-run takes its options, then TARGET and its arguments.
inline constexpr std::string_view k_usage = "air-run [OPTIONS] TARGET [ARGS...]\n"
                                            "air-run [OPTIONS] -f SPEC.yaml [TARGET [ARGS...]]";

/// Splits text into lines of at most `width` columns at spaces (a longer word
/// keeps a line of its own).
std::vector<std::string> wrap_words(std::string_view text, std::size_t width);

/// The placeholder of an option's value ("N", "FILE"); "" for a switch.
std::string value_name(const CLI::Option& opt);

/// An option's spellings as a reader writes them: {"-n", "--num-accelerators"},
/// {"--live", "--no-live"}, without the parser's own notation ("{false}").
std::vector<std::string> option_names(const CLI::Option& opt);

/// The line `--help` ends with: where the manual is. From a build tree that is
/// the generated page's path ("man /src/build/docs-generated/air-run.1.gz"),
/// once installed `man air-run`.
std::string manual_hint();

/// The visible options under one heading, in registration order.
std::vector<const CLI::Option*> options_in_group(const CLI::App& app, std::string_view group);

/// `--help`: the usage lines, the flags under their headings in a fixed order,
/// descriptions wrapped to k_help_width, then the footer.
class HelpFormatter : public CLI::Formatter {
public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override;
};

} // namespace air::cli
