#pragma once

#include <map>
#include <string>
#include <vector>

namespace air {

/// A process environment as a sorted name -> value map. Ranks get a private
/// copy built from the parent's snapshot; air-run never calls setenv, so one
/// rank's variables cannot leak into the next.
using Environment = std::map<std::string, std::string>;

/// Snapshot of this process's `environ`, taken once in the CLI.
Environment current_environment();

/// Flattens an environment into `NAME=value` strings for execve.
std::vector<std::string> to_envp_strings(const Environment& env);

/// Returns env[name] or `fallback` when unset.
std::string env_or(const Environment& env, const std::string& name, const std::string& fallback = "");

} // namespace air
