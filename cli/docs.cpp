// Documents generated from the registered options and the key table, so the
// man page and the shell completions cannot drift from `--help`.
#include "cli/docs.hpp"

#include "cli/help.hpp"
#include "core/spec/spec.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

namespace air::cli {

namespace {

constexpr std::string_view k_description =
    "air-run starts one process (a rank) per accelerator of this node, or the requested number of CPU "
    "ranks, and gives each rank the variables PyTorch's distributed package reads (RANK, LOCAL_RANK, "
    "WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). It supervises them: when one rank fails, "
    "the others are stopped, and the run ends with a report naming the first failure and its exit code. "
    "TARGET is a Python script (run with the interpreter of --python), a module with -m, or any "
    "executable with --no-python. Settings come from flags, AIR_RUN_* environment variables and a YAML "
    "spec file (-f), in that order of precedence.";

/// Escapes text for roff: backslashes, minus signs, and a leading control character.
std::string roff(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
  return out;
}

/// The key row an option sets through its primary flag; nullptr for air-run's
/// own flags and the torchrun spellings.
const SpecKey* key_of(const CLI::Option& opt) {
  for (const auto& row : spec_keys()) {
    for (const auto& name : opt.get_lnames()) {
      if (!row.flag.empty() && row.flag == name) return &row;
    }
  }
  return nullptr;
}

/// "\fB-n\fR, \fB--num-accelerators\fR \fIN\fR"
std::string roff_option_names(const CLI::Option& opt) {
  std::vector<std::string> names;
  for (const auto& name : option_names(opt)) names.push_back(fmt::format("\\fB{}\\fR", roff(name)));
  std::string out = fmt::format("{}", fmt::join(names, ", "));
  if (const auto value = value_name(opt); !value.empty()) out += fmt::format(" \\fI{}\\fR", roff(value));
  return out;
}

std::vector<const CLI::Option*> visible_options(const CLI::App& app) {
  std::vector<const CLI::Option*> out;
  for (const auto group : help_groups()) {
    for (const CLI::Option* opt : options_in_group(app, group)) out.push_back(opt);
  }
  return out;
}

/// All names of the visible options, "-n --num-accelerators ...".
std::string all_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : visible_options(app)) {
    for (auto& name : option_names(*opt)) names.push_back(std::move(name));
  }
  return fmt::format("{}", fmt::join(names, " "));
}

/// The values the shells offer for options with a fixed set (or a few usual
/// ones: accelerator types); empty for the others.
std::vector<std::string_view> value_choices(const CLI::Option& opt) {
  const auto& names = opt.get_lnames();
  const auto named = [&names](std::string_view name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  if (named("accelerator-type") || named("gpu-type")) {
    return {"CPU",        "GPU_1xA10",  "GPU_1xA100", "GPU_8xA100", "GPU_1xH100",
            "GPU_8xH100", "GPU_1xH200", "GPU_8xH200", "GPU_8xB200"};
  }
  if (named("rdzv-backend")) return {"static", "c10d"};
  if (named("nproc-per-node")) return {"gpu", "cpu", "auto"};
  if (named("redirects") || named("tee")) return {"0", "1", "2", "3"};
  return {};
}

/// What the shell offers as an option's value, by its placeholder.
enum class ValueKind { none, file, directory, command, choices };
ValueKind value_kind(const CLI::Option& opt) {
  if (!value_choices(opt).empty()) return ValueKind::choices;
  const std::string value = value_name(opt);
  if (value == "FILE") return ValueKind::file;
  if (value == "DIR") return ValueKind::directory;
  if (value == "PYTHON") return ValueKind::command;
  return ValueKind::none;
}

/// "-f|--spec" patterns of the visible options that take a value of `kind`
/// (any kind when `kind` is nullopt).
std::string case_pattern(const CLI::App& app, std::optional<ValueKind> kind) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : visible_options(app)) {
    if (value_name(*opt).empty() || (kind && value_kind(*opt) != *kind)) continue;
    for (auto& name : option_names(*opt)) names.push_back(std::move(name));
  }
  return names.empty() ? "--no-such-option" : fmt::format("{}", fmt::join(names, "|"));
}

/// bash `case` lines offering each fixed-choice option's values.
std::string bash_choice_cases(const CLI::App& app) {
  std::string out;
  for (const CLI::Option* opt : visible_options(app)) {
    const auto choices = value_choices(*opt);
    if (choices.empty() || value_name(*opt).empty()) continue;
    out += fmt::format("    {}) COMPREPLY=($(compgen -W '{}' -- \"$cur\")); return ;;\n",
                       fmt::join(option_names(*opt), "|"), fmt::join(choices, " "));
  }
  return out;
}

std::string bash_completion(const CLI::App& app) {
  return fmt::format(
      R"(# bash completion for air-run, generated by `air-run --print-completion bash`.
_air_run() {{
  local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} i
  # Everything from TARGET on belongs to the target: offer file names there.
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${{COMP_WORDS[i]}} in
      {}) ((i++)) ;;
      =) ((i++)) ;;
      -*) ;;
      *) compopt -o default 2>/dev/null; COMPREPLY=(); return ;;
    esac
  done
  case $prev in
    {}) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); return ;;
    {}) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")); return ;;
    {}) COMPREPLY=($(compgen -c -- "$cur")); return ;;
{}    {}) COMPREPLY=(); return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W '{}' -- "$cur"))
  else
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -F _air_run air-run
)",
      case_pattern(app, std::nullopt), case_pattern(app, ValueKind::file),
      case_pattern(app, ValueKind::directory), case_pattern(app, ValueKind::command), bash_choice_cases(app),
      case_pattern(app, ValueKind::none), all_names(app));
}

/// Text inside a zsh _arguments description: brackets and colons escaped, and
/// safe inside the single quotes the spec is written in.
std::string zsh_text(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '[' || c == ']' || c == ':' || c == '\\') out += '\\';
    if (c == '\'') {
      out += "'\\''";
      continue;
    }
    out += c;
  }
  return out;
}

std::string zsh_completion(const CLI::App& app) {
  std::string out =
      "#compdef air-run\n# zsh completion for air-run, generated by `air-run --print-completion "
      "zsh`.\n_arguments -s -S \\\n";
  for (const CLI::Option* opt : visible_options(app)) {
    // The first line of the description is enough for a menu.
    const std::string doc =
        zsh_text(opt->get_description().substr(0, opt->get_description().find(" [default")));
    std::string action;
    if (const auto value = value_name(*opt); !value.empty()) {
      const ValueKind kind = value_kind(*opt);
      const std::string choices = fmt::format("({})", fmt::join(value_choices(*opt), " "));
      action = fmt::format(":{}:{}", zsh_text(value),
                           kind == ValueKind::file        ? "_files"
                           : kind == ValueKind::directory ? "_files -/"
                           : kind == ValueKind::command   ? "_command_names -e"
                           : kind == ValueKind::choices   ? choices
                                                          : " ");
    }
    // Options that take a value or are switches may still repeat (--env), so no exclusion lists.
    const bool repeatable = !value_name(*opt).empty();
    for (const auto& name : option_names(*opt)) {
      out += fmt::format("  '{}{}[{}]{}' \\\n", repeatable ? "*" : "", name, doc, action);
    }
  }
  return out + "  '1:target:_files' \\\n  '*::target arguments:_files'\n";
}

} // namespace

std::string man_page(const CLI::App& app) {
  std::string out = ".TH AIR\\-RUN 1 \"\" \"air\\-run " AIR_VERSION "\" \"User Commands\"\n";
  out += ".SH NAME\nair\\-run \\- " +
         roff(app.get_description().substr(app.get_description().find(": ") + 2)) + "\n.SH SYNOPSIS\n.nf\n";
  for (std::string_view usage = k_usage; !usage.empty();) {
    const auto end = std::min(usage.find('\n'), usage.size());
    const std::string_view line = usage.substr(0, end);
    out += fmt::format("\\fBair\\-run\\fR{}\n", roff(line.substr(std::string_view("air-run").size())));
    usage.remove_prefix(std::min(end + 1, usage.size()));
  }
  out += ".fi\n.SH DESCRIPTION\n" + roff(k_description) + "\n.SH OPTIONS\n";
  for (const auto group : help_groups()) {
    const auto opts = options_in_group(app, group);
    if (opts.empty()) continue;
    out += ".SS " + roff(group) + "\n";
    for (const CLI::Option* opt : opts) {
      out += ".TP\n" + roff_option_names(*opt) + "\n" + roff(opt->get_description()) + "\n";
      if (const SpecKey* key = key_of(*opt)) {
        out += fmt::format(".br\nSpec key \\fB{}\\fR", roff(key->key));
        if (!key->env.empty()) out += fmt::format(", variable \\fB{}\\fR", roff(key->env));
        if (key->type == ValueType::boolean) out += fmt::format(", default {}", roff(key->default_text));
        out += ".\n";
      }
    }
  }
  out += ".SH SPEC FILE\nThe YAML file of \\fB\\-f\\fR holds these keys (nested keys as "
         "\\fBenvironment:\\fR mappings); the examples directory of the documentation has complete files.\n";
  for (const auto& row : spec_keys()) {
    out += fmt::format(".TP\n\\fB{}\\fR\n{} (default: {})\n", roff(row.key), roff(row.doc),
                       roff(row.default_text));
  }
  out += ".SH ENVIRONMENT\nEach variable sets its spec key; a flag overrides it, and it overrides the spec "
         "file.\n";
  for (const auto& row : spec_keys()) {
    if (row.env.empty()) continue;
    out += fmt::format(".TP\n\\fB{}\\fR\n{}\n", roff(row.env), roff(row.doc));
  }
  for (const auto& legacy : legacy_keys()) {
    out += fmt::format(".TP\n\\fB{}\\fR\ndeprecated: use {}\n", roff(legacy.env),
                       roff(find_spec_key(legacy.replaced)->env));
  }
  out += ".SH EXAMPLES AND EXIT STATUS\n.nf\n";
  const std::string footer = app.get_footer();
  out += roff(footer.substr(std::min(footer.find_first_not_of('\n'), footer.size()))) + "\n.fi\n";
  out += ".SH SEE ALSO\nThe README and docs/ of the air\\-run sources (docs/spec.md: every key; "
         "docs/supervision.md: exit codes), installed under /usr/share/doc/air\\-run by the package.\n";
  return out;
}

Status check_completion_shell(std::string_view shell) {
  if (shell.empty() || shell == "bash" || shell == "zsh") return ok_status();
  return usage_error(fmt::format("no completion for {}; supported: bash, zsh", shell));
}

std::string completion_script(const CLI::App& app, std::string_view shell) {
  return shell == "zsh" ? zsh_completion(app) : bash_completion(app);
}

std::string generated_document(const CLI::App& app, const CliOptions& options) {
  if (options.print_spec_table) return spec_keys_markdown();
  if (options.print_man) return man_page(app);
  if (!options.print_completion.empty()) return completion_script(app, options.print_completion);
  return {};
}

} // namespace air::cli
