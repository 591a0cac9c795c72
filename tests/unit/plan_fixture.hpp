#pragma once
// Shared by the planner tests (run_plan, run_numa_binding, spec_torchrun): a
// spec resolved from YAML, a CPU selection and a plan context; and by the
// supervisor's parts' tests (run_teardown, run_exits): a bare plan.

#include "core/run/plan.hpp"
#include "core/spec/spec.hpp"
#include "tests/unit/catch.hpp"

#include <string>

namespace air::test {

/// The spec that `yaml`, read as job.yaml, resolves to; fails the test if it does not.
inline LaunchSpec spec_from(const std::string& yaml) {
  SpecInputs in;
  in.file_text = yaml;
  in.file_path = "job.yaml";
  auto resolved = resolve_spec(in);
  INFO((resolved ? std::string() : resolved.error().message));
  REQUIRE(resolved.ok());
  return resolved->spec;
}

/// `n` ranks on CPU.
inline Selection cpu_selection(int n) {
  Selection s;
  s.cpu = true;
  s.ranks = n;
  s.accelerator_type = "CPU";
  return s;
}

/// Run r1 in /tmp/air-run-r1 on port 29500.
inline PlanContext plan_context() {
  PlanContext ctx;
  ctx.run_id = "r1";
  ctx.run_dir = "/tmp/air-run-r1";
  ctx.master_port = 29500;
  return ctx;
}

/// A plan of `n` ranks numbered 0 to n-1 and nothing else: the rank table
/// of the supervisor's parts' tests.
inline LaunchPlan bare_plan(int n) {
  LaunchPlan plan;
  for (int i = 0; i < n; ++i) {
    RankPlan r;
    r.rank = i;
    r.local_rank = i;
    plan.ranks.push_back(r);
  }
  return plan;
}

} // namespace air::test
