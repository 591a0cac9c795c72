// torchrun's command line read the way its argparse reads it: both spellings,
// unambiguous prefixes, PET_* variables, and the flags air-run has no use for.
#include "core/spec/torchrun.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <set>

namespace air {
namespace {

// Columns: name, short, takes a value, air-run flag it becomes, why it has no effect.
// Rows without a reason are flags the CLI registers itself (the key table);
// the reasons are shown only while the CLI has no flag of that name.
constexpr std::array k_torchrun_flags{
    TorchrunFlag{"nnodes", "", true, "", "one node only"},
    TorchrunFlag{"nproc-per-node", "", true, "", ""},
    TorchrunFlag{"rdzv-backend", "", true, "", "air-run's nodes meet at --master-addr/--master-port"},
    TorchrunFlag{"rdzv-endpoint", "", true, "", "air-run's nodes meet at --master-addr/--master-port"},
    TorchrunFlag{"rdzv-id", "", true, "", "air-run names the run itself (--run-id)"},
    TorchrunFlag{"rdzv-conf", "", true, "", "no rendezvous settings to apply"},
    TorchrunFlag{"standalone", "", false, "", "one node is air-run's default"},
    TorchrunFlag{"max-restarts", "", true, "", "the worker group is not restarted"},
    TorchrunFlag{"monitor-interval", "", true, "",
                 "air-run waits on its ranks' events instead of polling them"},
    TorchrunFlag{"start-method", "", true, "", "it applies to function entrypoints; ranks are processes"},
    TorchrunFlag{"event-log-handler", "", true, "", "air-run writes no torchelastic events"},
    TorchrunFlag{"role", "", true, "", ""},
    TorchrunFlag{"module", "m", false, "", ""},
    TorchrunFlag{"no-python", "", false, "", ""},
    TorchrunFlag{"run-path", "", false, "",
                 "the script runs under the interpreter as a file, which runpy.run_path also does"},
    TorchrunFlag{"log-dir", "", true, "", ""},
    TorchrunFlag{"redirects", "r", true, "", ""},
    TorchrunFlag{"tee", "t", true, "", ""},
    TorchrunFlag{"local-ranks-filter", "", true, "", ""},
    TorchrunFlag{"node-rank", "", true, "", ""},
    TorchrunFlag{"master-addr", "", true, "", ""},
    TorchrunFlag{"master-port", "", true, "", ""},
    TorchrunFlag{"local-addr", "", true, "", "ranks reach each other through MASTER_ADDR"},
    TorchrunFlag{"logs-specs", "", true, "", "torchrun's log plugins do not apply; see --log-dir"},
    TorchrunFlag{"numa-binding", "", true, "", ""},
    TorchrunFlag{"signals-to-handle", "", true, "", ""},
    TorchrunFlag{"duplicate-stdout-filters", "", true, "", ""},
    TorchrunFlag{"duplicate-stderr-filters", "", true, "", ""},
    TorchrunFlag{"shutdown-timeout", "", true, "grace-period", ""},
    TorchrunFlag{"virtual-local-rank", "", false, "", ""},
};

// torchrun's options that air-run registers under the same name but has no
// use for outside a torchrun command line (the "torchrun compatibility" keys,
// less --max-restarts, which air-run's own docs use).
constexpr std::array<std::string_view, 15> k_torchrun_only{
    "nproc-per-node",
    "standalone",
    "rdzv-backend",
    "rdzv-endpoint",
    "rdzv-id",
    "rdzv-conf",
    "role",
    "redirects",
    "tee",
    "local-ranks-filter",
    "numa-binding",
    "signals-to-handle",
    "duplicate-stdout-filters",
    "duplicate-stderr-filters",
    "virtual-local-rank",
};

std::string dashes(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

std::string pet_name(std::string_view flag) {
  std::string out = "PET_";
  for (char c : flag) out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

const TorchrunFlag* torchrun_flag(std::string_view name) {
  for (const auto& flag : k_torchrun_flags) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

const KnownFlag* known_flag(const std::vector<KnownFlag>& known, std::string_view name) {
  for (const auto& flag : known) {
    if (flag.name == name) return &flag;
  }
  return nullptr;
}

const KnownFlag* known_short(const std::vector<KnownFlag>& known, std::string_view letter) {
  for (const auto& flag : known) {
    if (!flag.short_name.empty() && flag.short_name == letter) return &flag;
  }
  return nullptr;
}

/// The whole name a typed long name stands for: itself when some flag has
/// it, else the one flag it is a prefix of (argparse's abbreviations).
Expected<std::string> expand(std::string_view typed, const std::vector<KnownFlag>& known,
                             std::string_view as_typed) {
  if (known_flag(known, typed) || torchrun_flag(typed)) return std::string(typed);
  std::set<std::string> all;
  std::set<std::string> torchrun;
  for (const auto& flag : known) {
    if (flag.name.starts_with(typed)) all.insert(flag.name);
  }
  for (const auto& flag : k_torchrun_flags) {
    if (flag.name.starts_with(typed)) {
      all.insert(std::string(flag.name));
      torchrun.insert(std::string(flag.name));
    }
  }
  if (all.size() == 1) return *all.begin();
  if (all.empty()) return std::string(typed); // unknown: the parser reports it
  // torchrun resolves a prefix among its own flags; a line written for it means that flag.
  if (torchrun.size() == 1) return *torchrun.begin();
  std::string names;
  for (const auto& name : all) names += (names.empty() ? "--" : ", --") + name;
  return usage_error(fmt::format("ambiguous option: --{} could match {}", as_typed, names));
}

struct Reader {
  const std::vector<KnownFlag>& known;
  LauncherArgs out;
  std::set<std::string> given; ///< torchrun flag names the command line gave

  void note_ignored(const TorchrunFlag& flag, std::string_view how) {
    const std::string line = fmt::format(
        "air-run: note: {} accepted for torchrun compatibility, without effect: {}", how, flag.ignored_why);
    if (std::find(out.notes.begin(), out.notes.end(), line) == out.notes.end()) out.notes.push_back(line);
  }

  /// The CLI's name for a torchrun flag, or nullopt when the CLI has none.
  std::optional<std::string> cli_name(const TorchrunFlag& flag) const {
    if (known_flag(known, flag.name)) return std::string(flag.name);
    if (!flag.air_flag.empty() && known_flag(known, flag.air_flag)) return std::string(flag.air_flag);
    return std::nullopt;
  }
};

} // namespace

std::span<const TorchrunFlag> torchrun_flags() { return k_torchrun_flags; }

bool is_torchrun_only(std::string_view name, const std::vector<KnownFlag>& known) {
  if (torchrun_flag(name) == nullptr) return false;
  if (std::find(k_torchrun_only.begin(), k_torchrun_only.end(), name) != k_torchrun_only.end()) return true;
  return known_flag(known, name) == nullptr; // accepted without effect, or under air-run's name
}

Expected<LauncherArgs> normalize_launcher_args(const std::vector<std::string>& args,
                                               const std::vector<KnownFlag>& known, const Environment& env) {
  Reader reader{known, {}, {}};
  std::vector<std::string> rest; // options, rewritten
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" || arg.size() < 2 || arg[0] != '-') break;
    if (arg[1] != '-') {
      // Short options pass as written; only their value must not be taken for the target.
      const std::string letter = arg.substr(1, 1);
      const KnownFlag* flag = known_short(known, letter);
      rest.push_back(arg);
      for (const auto& t : k_torchrun_flags) {
        if (t.short_name != letter) continue;
        reader.given.insert(std::string(t.name));
        if (reader.out.torchrun_style.empty() && is_torchrun_only(t.name, known))
          reader.out.torchrun_style = arg.substr(0, 2);
      }
      if (flag && flag->takes_value && arg.size() == 2 && i + 1 < args.size()) rest.push_back(args[++i]);
      continue;
    }
    const auto eq = arg.find('=');
    const std::string typed = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    auto name = expand(dashes(typed), known, typed);
    if (!name) return name.error();
    const bool attached = eq != std::string::npos;
    const KnownFlag* flag = known_flag(known, *name);
    const TorchrunFlag* tflag = torchrun_flag(*name);
    if (tflag) reader.given.insert(*name);
    const bool torchrun_spelling = typed.find('_') != std::string::npos && (flag || tflag);
    if (reader.out.torchrun_style.empty() && (torchrun_spelling || (tflag && is_torchrun_only(*name, known))))
      reader.out.torchrun_style = "--" + typed;
    if (!flag && tflag) {
      if (auto other = reader.cli_name(*tflag)) {
        flag = known_flag(known, *other);
        name = *other;
      }
    }
    if (flag) {
      rest.push_back("--" + *name + (attached ? arg.substr(eq) : ""));
      if (flag->takes_value && !attached && i + 1 < args.size()) rest.push_back(args[++i]);
      continue;
    }
    if (tflag) {
      std::string how = "--" + *name;
      if (tflag->takes_value && attached) how += " " + arg.substr(eq + 1);
      if (tflag->takes_value && !attached && i + 1 < args.size()) how += " " + args[++i];
      reader.note_ignored(*tflag, how);
      continue;
    }
    rest.push_back(arg); // unknown to both: the parser names it
  }

  // PET_* variables: torchrun's defaults for flags the command line left out.
  std::vector<std::string> from_env;
  for (const auto& flag : k_torchrun_flags) {
    if (reader.given.count(std::string(flag.name))) continue;
    const std::string var = pet_name(flag.name);
    const auto it = env.find(var);
    if (it == env.end() || it->second.empty()) continue;
    if (!flag.takes_value) {
      // torchrun's check_env: bool(int(value)).
      const std::string& v = it->second;
      const bool number = std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!number)
        return usage_error(fmt::format("environment variable {}: expected 0 or 1, got '{}'", var, v));
      if (std::all_of(v.begin(), v.end(), [](char c) { return c == '0'; })) continue;
    }
    const auto name = reader.cli_name(flag);
    if (!name) {
      reader.note_ignored(flag, var);
      continue;
    }
    from_env.push_back("--" + *name);
    if (flag.takes_value) from_env.push_back(it->second);
  }

  LauncherArgs& out = reader.out;
  out.args = std::move(from_env);
  out.args.insert(out.args.end(), rest.begin(), rest.end());
  if (i < args.size() && args[i] == "--") out.args.push_back(args[i++]);
  if (i < args.size()) {
    out.args.push_back(args[i++]); // the target
    // argparse gives a `--` right after the script to the script's own
    // positional and removes it there: torchrun never passes it on.
    if (i < args.size() && args[i] == "--") ++i;
  }
  out.args.insert(out.args.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return std::move(out);
}

int StdStreams::for_rank(int local_rank) const {
  if (per_rank.empty()) return all;
  const auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? 0 : it->second;
}

Expected<StdStreams> parse_std_streams(std::string_view text, std::string_view what) {
  const auto bad = [&] {
    return usage_error(
        fmt::format("{}: expected 0, 1, 2, 3 or LOCAL_RANK:N pairs like 0:3,1:2, got '{}'", what, text));
  };
  const auto stream_bits = [](char c) { return c >= '0' && c <= '3' ? c - '0' : -1; };
  StdStreams out;
  if (text.size() == 1) {
    out.all = stream_bits(text[0]);
    if (out.all < 0) return bad();
    return out;
  }
  // torchrun's pattern: ^(\d:[0123],)*(\d:[0123])$
  if ((text.size() + 1) % 4 != 0) return bad();
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    const bool sep = i + 3 >= text.size() || text[i + 3] == ',';
    if (!digit || text[i + 1] != ':' || stream_bits(text[i + 2]) < 0 || !sep) return bad();
    out.per_rank[text[i] - '0'] = stream_bits(text[i + 2]);
  }
  return out;
}

Expected<NprocPerNode> parse_nproc_per_node(std::string_view text, std::string_view what) {
  NprocPerNode out;
  if (text == "gpu")
    out.kind = NprocPerNode::Kind::gpu;
  else if (text == "cpu")
    out.kind = NprocPerNode::Kind::cpu;
  else if (text == "auto")
    out.kind = NprocPerNode::Kind::auto_detect;
  else {
    const bool digits = !text.empty() && text.size() <= 9 &&
                        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits)
      return usage_error(
          fmt::format("{}: expected a number of ranks, gpu, cpu or auto, got '{}'", what, text));
    out.count = std::stoi(std::string(text));
    if (out.count < 1) return usage_error(fmt::format("{}: must be at least 1, got {}", what, text));
  }
  return out;
}

} // namespace air
