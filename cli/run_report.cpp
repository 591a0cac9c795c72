#include "cli/run_report.hpp"

#include <cstdio>
#include <fmt/format.h>

namespace air::cli {

int report_run(const LaunchSpec&, const Hardware&, const Selection&, const LaunchPlan&,
               const RunOutcome& outcome, const Environment&) {
  const int code = outcome.exit_code();
  if (code != 0) std::fputs(fmt::format("air-run: {}\n", outcome.reason).c_str(), stderr);
  return code;
}

} // namespace air::cli
