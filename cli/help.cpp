#include "cli/help.hpp"

#include "core/os/host.hpp"
#include "core/spec/spec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <filesystem>

namespace air::cli {

namespace {

/// Width of the names column; longer names put their description on the next line.
constexpr std::size_t k_names_width = 30;

constexpr std::array k_help_groups{
    key_group::launch, key_group::accelerators, key_group::environment, key_group::nodes,
    key_group::output, key_group::mlflow,       key_group::torchrun,    k_group_other};

} // namespace

std::span<const std::string_view> help_groups() { return k_help_groups; }

std::vector<std::string> wrap_words(std::string_view text, std::size_t width) {
  std::vector<std::string> lines;
  std::string line;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto end = std::min(text.find(' ', pos), text.size());
    const std::string_view word = text.substr(pos, end - pos);
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(std::move(line));
      line.clear();
    }
    if (!word.empty()) line += line.empty() ? std::string(word) : " " + std::string(word);
    pos = end + 1;
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

std::string value_name(const CLI::Option& opt) {
  if (opt.get_type_size() == 0) return {};
  // The placeholder as registered ("HOST[:PORT]", "N|MIN:MAX"). CLI11 would
  // append a validator's description after a ':', so no option gets a check
  // with a description (tests/e2e/test_launch_checks.sh looks at both).
  return opt.get_type_name();
}

std::vector<std::string> option_names(const CLI::Option& opt) {
  std::vector<std::string> names;
  for (const auto& name : opt.get_snames()) names.push_back("-" + name);
  for (const auto& name : opt.get_lnames()) names.push_back("--" + name);
  return names;
}

std::string manual_hint() {
  const std::string dir = self_exe_dir(); // build/cli in a build tree, <prefix>/bin once installed
  const std::string page = dir.empty() ? std::string() : dir + "/../docs-generated/air-run.1.gz";
  std::error_code ec;
  if (!page.empty() && std::filesystem::exists(page, ec)) {
    const std::string path = std::filesystem::weakly_canonical(page, ec).string();
    return fmt::format("Manual: man {}\n  (this build's; `man air-run` once installed)", path);
  }
  return "Manual: man air-run";
}

std::vector<const CLI::Option*> options_in_group(const CLI::App& app, std::string_view group) {
  return app.get_options([group](const CLI::Option* opt) { return opt->get_group() == group; });
}

std::string HelpFormatter::make_help(const CLI::App* app, std::string /*name*/,
                                     CLI::AppFormatMode /*mode*/) const {
  std::string out = app->get_description() + "\n\n";
  std::string_view usage = k_usage;
  for (std::string_view prefix = "Usage: "; !usage.empty(); prefix = "       ") {
    const auto end = std::min(usage.find('\n'), usage.size());
    out += fmt::format("{}{}\n", prefix, usage.substr(0, end));
    usage.remove_prefix(std::min(end + 1, usage.size()));
  }
  for (const auto group : k_help_groups) {
    const auto opts = options_in_group(*app, group);
    if (opts.empty()) continue;
    out += fmt::format("\n{}:\n", group);
    for (const CLI::Option* opt : opts) {
      std::string left = "  " + fmt::format("{}", fmt::join(option_names(*opt), ", "));
      if (const auto value = value_name(*opt); !value.empty()) left += " " + value;
      const auto lines = wrap_words(opt->get_description(), k_help_width - k_names_width);
      bool first = true;
      if (left.size() + 1 > k_names_width) {
        out += left + "\n";
        left.clear();
      }
      for (const auto& line : lines) {
        out += fmt::format("{:<{}}{}\n", first ? left : "", k_names_width, line);
        first = false;
      }
      if (lines.empty()) out += left + "\n";
    }
  }
  return out + app->get_footer() + "\n" + manual_hint() + "\n";
}

} // namespace air::cli
