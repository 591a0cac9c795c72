#pragma once

#include "core/base/environment.hpp"
#include "core/base/error.hpp"

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace air {

/// One option of torchrun 2.x's command line (torch/distributed/run.py), by
/// its dash spelling; torchrun accepts every one with underscores too.
/// Options air-run implements are registered by the CLI from the key table;
/// this table says how torchrun spells them and what happens to the rest.
struct TorchrunFlag {
  std::string_view name;       ///< "nproc-per-node"
  std::string_view short_name; ///< "r", "t", "m" or ""
  bool takes_value = true;
  /// The air-run flag it becomes when the CLI has no flag of the same name
  /// ("grace-period" for "shutdown-timeout"); "" = only its own name.
  std::string_view air_flag;
  /// Why air-run accepts it without effect when the CLI knows neither name;
  /// noted once on stderr.
  std::string_view ignored_why;
};

/// Every option torchrun 2.x accepts, in run.py's order.
std::span<const TorchrunFlag> torchrun_flags();

/// A flag the CLI registered: long name without dashes, short letter or "".
struct KnownFlag {
  std::string name;
  std::string short_name;
  bool takes_value = false;
};

/// A command line rewritten into the spelling the CLI parser knows.
struct LauncherArgs {
  std::vector<std::string> args;  ///< the rewritten arguments (no program name)
  std::vector<std::string> notes; ///< "air-run: note: ..." lines to print once on stderr
  /// The first option that makes this torchrun's command line rather than
  /// air-run's, as typed ("--nproc_per_node", "--standalone", "-r"); "" when
  /// none does. See `is_torchrun_only`.
  std::string torchrun_style;
};

/// Whether a torchrun option marks a command line as written for torchrun:
/// it is one air-run has no word of its own for (--nproc-per-node,
/// --standalone, --rdzv-*, --role, -r/--redirects, -t/--tee,
/// --local-ranks-filter, and those accepted without effect or under another
/// name). Options both launchers have (--nnodes, --node-rank, --master-addr,
/// --master-port, --max-restarts, --log-dir, -m, --no-python) do not; any
/// option spelled with underscores does (argparse's spelling is torchrun's).
bool is_torchrun_only(std::string_view name, const std::vector<KnownFlag>& known);

/// Reads a torchrun-style command line the way torchrun's argparse does, so
/// every flag of the CLI gets torchrun's spellings for free:
///  - `--nproc_per_node` is `--nproc-per-node` (underscores are dashes),
///  - an unambiguous prefix is the whole flag (`--nproc` = `--nproc-per-node`);
///    a prefix shared by several flags is an error naming them, unless it
///    picks exactly one of torchrun's flags (what torchrun itself would take),
///  - torchrun flags the CLI does not have are accepted and noted once,
///  - a `--` right after the script is dropped, as argparse drops it,
///  - torchrun's `PET_<NAME>` variables (how Kubeflow's PyTorchJob configures
///    it) stand for flags the command line does not give.
/// Everything from the target on is left alone. Flags the CLI does not know
/// and torchrun does not either pass through, for the parser's own error.
Expected<LauncherArgs> normalize_launcher_args(const std::vector<std::string>& args,
                                               const std::vector<KnownFlag>& known, const Environment& env);

/// torchrun's `-r/--redirects` and `-t/--tee` value: which of a local rank's
/// streams go to its files (1 stdout, 2 stderr, 3 both). "3" applies to every
/// local rank; "0:3,1:2" to the ranks named, the others keep none (as torchrun).
struct StdStreams {
  int all = 0;
  std::map<int, int> per_rank;
  /// The streams of one local rank.
  int for_rank(int local_rank) const;
};

/// Parses "0".."3" or torchrun's map form "0:3,1:2" (single-digit local
/// ranks, as torchrun's own pattern). Errors name `what`.
Expected<StdStreams> parse_std_streams(std::string_view text, std::string_view what);

/// torchrun's `--nproc-per-node`: a count, or a word resolved against the
/// machine (gpu: the GPUs, cpu: the CPUs, auto: the GPUs if any, else the CPUs).
struct NprocPerNode {
  enum class Kind { count, gpu, cpu, auto_detect };
  Kind kind = Kind::count;
  int count = 1;
};

/// Parses "4", "gpu", "cpu" or "auto". Errors name `what`.
Expected<NprocPerNode> parse_nproc_per_node(std::string_view text, std::string_view what);

} // namespace air
