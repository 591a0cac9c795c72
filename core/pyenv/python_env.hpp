#pragma once

// The pure part of `environment.dependencies`: normalising requirements,
// computing the cache key and planning the commands that build an
// environment. No system calls here; core/env_cache.* runs the plan.

#include "core/base/error.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace air {

/// Where pip takes packages from. Part of the cache key: the same requirement
/// from another index may be another package.
struct PackageSources {
  std::vector<std::string> find_links; ///< absolute directories or URLs, in the order given
  std::string index_url;               ///< "" = pip's default
  bool no_index = false;
};

/// What identifies a base interpreter. `path` is the realpath of the program
/// air-run resolved; `prefix` and `version` come from running it once
/// (`interpreter_probe_argv`), so a pyenv shim pointing at another version, or
/// an interpreter upgraded in place, gives another key.
struct InterpreterIdentity {
  std::string path;    ///< realpath of the resolved interpreter
  std::string prefix;  ///< sys.prefix
  std::string version; ///< sys.version on one line
};

/// Everything the cache key covers: one environment per distinct request.
struct EnvRequest {
  InterpreterIdentity interpreter;
  std::vector<std::string> requirements; ///< normalised, sorted, unique (`normalise_requirements`)
  PackageSources sources;
  bool system_site_packages = true;
};

/// Normalises one requirement so that spellings pip treats alike give one key:
/// surrounding and inner blanks are removed from the name, extras and version
/// part (`Foo_Bar [X] >= 1.0` -> `foo-bar[x]>=1.0`), the project name is
/// lower-cased with runs of `-_.` folded to `-` (PEP 503), a marker keeps
/// single spaces (`foo ; python_version < "3.12"`). Paths and URLs that are not
/// `name @ url` are kept as written, blanks collapsed.
/// Errors (usage): "<where>: empty requirement", and pip options, which air-run
/// cannot honour per requirement: "<where>: '-r other.txt': requirement file
/// includes (-r/-c) are not supported; list the requirements themselves",
/// "<where>: '--pre': pip options are not supported in requirements; use
/// environment.find_links, environment.index_url or environment.no_index".
Expected<std::string> normalise_requirement(std::string_view text, const std::string& where);

/// Normalises a list (`environment.dependencies` as a list); the result is
/// sorted and without duplicates. `where` names the key for messages.
Expected<std::vector<std::string>> normalise_requirements(const std::vector<std::string>& items,
                                                          const std::string& where);

/// Reads requirements-file text the way pip does for plain requirement lines:
/// `#` comments (at line start or after a blank), blank lines and trailing
/// backslash continuations. Each line goes through `normalise_requirement`
/// with "<path>:<line>" as its place; the result is sorted and unique, so the
/// file and list forms of one set give the same key.
Expected<std::vector<std::string>> parse_requirements_text(std::string_view text, const std::string& path);

/// Makes a find-links entry absolute against `cwd`: URLs (`scheme://`) stay
/// as they are, relative paths are joined and lexically normalised.
std::string absolute_link(const std::string& link, const std::string& cwd);

/// The canonical text the key is the hash of; also stored in the marker, so
/// `--list-envs` can show what an environment was built from.
std::string env_key_text(const EnvRequest& request);

/// The cache key: 64 hex characters, sha256 of `env_key_text`.
std::string env_key(const EnvRequest& request);

/// The first 12 characters of a key, as shown to users.
std::string short_key(const std::string& key);

/// argv that makes `python` print its identity: sys.prefix then sys.version,
/// one per line. Runs without `site` for speed.
std::vector<std::string> interpreter_probe_argv(const std::string& python);

/// Parses the probe's output. Errors (usage) name the interpreter:
/// "environment.python /x/python: unexpected output when asked for its version: '...'".
Expected<InterpreterIdentity> parse_probe_output(std::string_view output, const std::string& realpath);

/// The commands that build an environment in `dir`, in order.
struct EnvBuildPlan {
  std::vector<std::string> create;  ///< python -m venv [--system-site-packages] DIR
  std::vector<std::string> install; ///< DIR/bin/python -m pip install ... -r FILE
  std::string requirements_file;    ///< FILE, written before `install` runs
  std::string requirements_text;    ///< its content, one requirement per line
};

/// Plans the build of `request` in `dir` with the interpreter program `python`
/// (the resolved name, so that a shim still selects its version).
EnvBuildPlan plan_env_build(const EnvRequest& request, const std::string& python, const std::string& dir);

} // namespace air
