#include "cli/dry_run.hpp"

#include <fmt/format.h>

#include <cstdio>

namespace air::cli {

void print_dry_run(const std::vector<std::string>& spec_lines, const Hardware& hardware,
                   const Selection& selection, const PreparedEnv* python_env, const mlflow::Tracker* tracker,
                   const LaunchPlan& plan) {
  std::fputs("Resolved spec:\n", stdout);
  for (const auto& line : spec_lines) std::fputs(("  " + line + "\n").c_str(), stdout);
  std::fputs(fmt::format("Hardware: {} ({})\n", detected_accelerator_type(hardware),
                         hardware.reason.empty() ? hardware.source : hardware.reason)
                 .c_str(),
             stdout);
  for (const auto& line : selection.notices) std::fputs((line + "\n").c_str(), stdout);
  if (python_env != nullptr) std::fputs(fmt::format("Python {}\n", python_env->status).c_str(), stdout);
  if (tracker != nullptr) std::fputs((tracker->describe() + "\n").c_str(), stdout);
  std::fputs("Plan:\n", stdout);
  for (const auto& line : describe_plan(plan)) std::fputs(("  " + line + "\n").c_str(), stdout);
}

} // namespace air::cli
