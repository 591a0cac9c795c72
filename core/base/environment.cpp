#include "core/base/environment.hpp"

extern char** environ; // NOLINT(readability-redundant-declaration)

namespace air {

Environment current_environment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::vector<std::string> to_envp_strings(const Environment& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

std::string env_or(const Environment& env, const std::string& name, const std::string& fallback) {
  const auto it = env.find(name);
  return it == env.end() ? fallback : it->second;
}

} // namespace air
