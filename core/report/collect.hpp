#pragma once

#include "core/base/duration.hpp"
#include "core/hw/hardware.hpp"
#include "core/mlflow/run_info.hpp"
#include "core/pyenv/cache.hpp"
#include "core/report/rank_result.hpp"
#include "core/run/error_file.hpp"
#include "core/run/outcome.hpp"
#include "core/run/plan.hpp"
#include "core/spec/spec.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace air {

/// Reads and parses the result file at `path` ("" gives missing). Files over
/// `max_bytes` are too_large and are not read; a directory, FIFO or device is
/// invalid (opened non-blocking, so a FIFO cannot hang air-run). Never throws.
RankResult read_rank_result(const std::string& path, std::uint64_t max_bytes = k_max_result_bytes);

/// The error shown for one rank: from its TORCHELASTIC_ERROR_FILE when it
/// wrote one, else (for a rank that failed on its own) its last output lines,
/// else the reason it could not be started.
struct RankError {
  enum class Source {
    error_file,  ///< torchelastic error file (torch's @record)
    output_tail, ///< no error file: the rank's last output lines stand in
    spawn,       ///< the rank could not be started (exec failed)
  };
  Source source = Source::output_tail;
  std::string type;    ///< exception type (an output tail's from its exception line), "" when unknown
  std::string message; ///< "boom", or the exit description for output_tail
  std::string
      traceback; ///< py_callstack, the output tail as shown (shown_tail.hpp), or raw text of a malformed file
  std::optional<std::int64_t> timestamp; ///< from the error file
};

/// "error_file", "output_tail", "spawn": the spellings used in the summary.
std::string_view to_string(RankError::Source source);

/// Everything the end-of-run outputs (summary, human report, JUnit, GitHub
/// annotations) are rendered from. It only refers to the run's inputs, which
/// must outlive it. `results` and `errors` are parallel to `outcome.ranks`.
struct RunReport {
  const LaunchSpec& spec;
  const Hardware& hardware;
  const Selection& selection;
  const LaunchPlan& plan;
  const RunOutcome& outcome;
  std::string host;  ///< gethostname() of this node
  int exit_code = 0; ///< outcome.exit_code(), air-run's exit status
  std::vector<RankResult> results;
  std::vector<std::optional<RankError>> errors;
  const mlflow::RunInfo* mlflow = nullptr; ///< MLflow tracking, nullptr when not configured
  const PreparedEnv* python_env = nullptr; ///< environment.dependencies' environment, nullptr without one
  /// The error that made air-run refuse the launch before any rank started (a
  /// bad spec, a hardware mismatch, an unwritable report path); nullptr for a
  /// run that launched. A refused launch has no selection and no plan: the
  /// reports say so instead of showing empty ones.
  const Error* refusal = nullptr;
  bool spec_resolved = true;   ///< false when the spec itself was refused: its settings are unknown
  bool hardware_probed = true; ///< false when the launch was refused before the GPUs were looked at
  /// "/usr/bin/python3, Python 3.11.2" for a failed import's hint: asked only when shown; unset: the name.
  std::function<std::string()> describe_python = nullptr;
};

/// Whether a rank failed on its own: it could not be started, or it ended
/// unsuccessfully before air-run signalled it. Ranks air-run stopped during
/// teardown are not failures (they are "stopped").
bool rank_failed(const RankOutcome& rank);

/// "exit code 3", "signal 9 (SIGKILL), killed by the OOM killer",
/// "could not be started: <spawn error>".
std::string describe_rank_end(const RankOutcome& rank);

/// The plan of rank `rank`, or nullptr when the plan has no such rank.
const RankPlan* find_rank_plan(const LaunchPlan& plan, int rank);

/// Chooses the error shown for a rank (see RankError). Pure. A rank that
/// succeeded has none; nor has one stopped that left no error file.
std::optional<RankError> rank_error(const RankOutcome& rank,
                                    const std::optional<ErrorFileRecord>& error_file);

/// Reads every rank's result and error files (paths from the plan) and builds
/// the report. Never fails: unreadable files become states in the report.
/// `exit_code` is `outcome.exit_code()`; `host` is this node's name.
RunReport collect_report(const LaunchSpec& spec, const Hardware& hardware, const Selection& selection,
                         const LaunchPlan& plan, const RunOutcome& outcome, int exit_code, std::string host);

} // namespace air
