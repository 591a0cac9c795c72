// Spec keys of the Python environment (issue 5): YAML, AIR_RUN_* and flags.
#include "core/pyenv/cache.hpp"
#include "core/spec/spec.hpp"
#include "tests/unit/catch.hpp"

namespace {

using Flags = std::vector<std::tuple<std::string, std::string, std::string>>;

air::ResolvedSpec resolve(std::string yaml, air::Environment env = {}, Flags flags = {}) {
  air::SpecInputs in;
  in.file_text = std::move(yaml);
  in.file_path = "job.yaml";
  in.environment = std::move(env);
  in.flags = std::move(flags);
  auto r = air::resolve_spec(in);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return *r;
}

std::string resolve_error(std::string yaml, air::Environment env = {}, Flags flags = {}) {
  air::SpecInputs in;
  in.file_text = std::move(yaml);
  in.file_path = "job.yaml";
  in.environment = std::move(env);
  in.flags = std::move(flags);
  auto r = air::resolve_spec(in);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

} // namespace

TEST_CASE("environment keys: defaults", "[spec][python_env]") {
  const auto s = resolve("").spec;
  CHECK(s.find_links.value.empty());
  CHECK(s.index_url.value.empty());
  CHECK_FALSE(s.no_index.value);
  CHECK(s.system_site_packages.value);
  CHECK(s.system_site_packages.is_default());
  CHECK(s.env_cache_dir.value.empty());
  CHECK_FALSE(s.rebuild_env.value);
  CHECK(air::find_spec_key("environment.find_links")->env == "AIR_RUN_FIND_LINKS");
  CHECK(air::find_spec_key("env_cache_dir")->env == "AIR_RUN_ENV_CACHE_DIR");
  CHECK(air::find_spec_key("rebuild_env")->flag == "rebuild-env");
}

TEST_CASE("environment keys from YAML, env and flags, with precedence", "[spec][python_env]") {
  const std::string yaml = "environment:\n"
                           "  find_links: [wheels, /srv/more]\n"
                           "  index_url: http://mirror/simple\n"
                           "  no_index: true\n"
                           "  system_site_packages: false\n"
                           "env_cache_dir: envs\n"
                           "rebuild_env: true\n";
  const auto from_file = resolve(yaml).spec;
  CHECK(from_file.find_links.value == std::vector<std::string>{"wheels", "/srv/more"});
  CHECK(from_file.find_links.origin.describe() == "job.yaml:2:3");
  CHECK(from_file.index_url.value == "http://mirror/simple");
  CHECK(from_file.no_index.value);
  CHECK_FALSE(from_file.system_site_packages.value);
  CHECK(from_file.env_cache_dir.value == "envs");
  CHECK(from_file.rebuild_env.value);

  const auto from_env = resolve(yaml, {{"AIR_RUN_FIND_LINKS", "/a /b"},
                                       {"AIR_RUN_NO_INDEX", "0"},
                                       {"AIR_RUN_SYSTEM_SITE_PACKAGES", "yes"},
                                       {"AIR_RUN_ENV_CACHE_DIR", "/cache"},
                                       {"AIR_RUN_INDEX_URL", "http://other/simple"}})
                            .spec;
  CHECK(from_env.find_links.value == std::vector<std::string>{"/a", "/b"});
  CHECK_FALSE(from_env.no_index.value);
  CHECK(from_env.system_site_packages.value);
  CHECK(from_env.env_cache_dir.value == "/cache");
  CHECK(from_env.index_url.origin.describe() == "env AIR_RUN_INDEX_URL");

  const auto from_flags = resolve(yaml, {{"AIR_RUN_ENV_CACHE_DIR", "/cache"}},
                                  {{"environment.find_links", "w1", "--find-links"},
                                   {"environment.find_links", "w2", "--find-links"},
                                   {"environment.system_site_packages", "true", "--system-site-packages"},
                                   {"env_cache_dir", "/flag-cache", "--env-cache-dir"},
                                   {"rebuild_env", "false", "--rebuild-env"}})
                              .spec;
  CHECK(from_flags.find_links.value == std::vector<std::string>{"w1", "w2"});
  CHECK(from_flags.system_site_packages.value);
  CHECK(from_flags.env_cache_dir.value == "/flag-cache");
  CHECK(from_flags.env_cache_dir.origin.describe() == "flag --env-cache-dir");
  CHECK_FALSE(from_flags.rebuild_env.value);
}

TEST_CASE("environment keys: type errors name the place", "[spec][python_env]") {
  CHECK(resolve_error("environment:\n  no_index: maybe\n") ==
        "job.yaml:2:13: environment.no_index: expected true or false, got 'maybe'");
  CHECK(resolve_error("", {{"AIR_RUN_SYSTEM_SITE_PACKAGES", "sometimes"}}) ==
        "environment variable AIR_RUN_SYSTEM_SITE_PACKAGES: expected true or false (or 1/0, yes/no), got "
        "'sometimes'");
  CHECK(resolve_error("environment:\n  find_links: {a: b}\n") ==
        "job.yaml:2:15: environment.find_links: expected a list of strings, got a mapping");
  CHECK(resolve_error("environment:\n  find_link: [w]\n") ==
        "job.yaml:2:3: unknown key 'environment.find_link' (did you mean 'environment.find_links'?)");
}

TEST_CASE("env_cache_dir: flag, XDG_CACHE_HOME, HOME", "[spec][python_env]") {
  air::LaunchSpec spec;
  auto dir = air::env_cache_dir(spec, {{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "/xdg"}});
  REQUIRE(dir.ok());
  CHECK(*dir == "/xdg/air-run/envs");
  dir = air::env_cache_dir(spec, {{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "relative/ignored"}});
  REQUIRE(dir.ok());
  CHECK(*dir == "/home/u/.cache/air-run/envs");
  auto none = air::env_cache_dir(spec, {});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message ==
        "env_cache_dir: no cache directory: set HOME or XDG_CACHE_HOME, or give --env-cache-dir");
  spec.env_cache_dir.value = "/given/";
  dir = air::env_cache_dir(spec, {});
  REQUIRE(dir.ok());
  CHECK(*dir == "/given");
}

TEST_CASE("prepare_python_env without dependencies does nothing", "[python_env]") {
  air::LaunchSpec spec;
  spec.python.value = "/nonexistent/python"; // never resolved: nothing to prepare
  auto env = air::prepare_python_env(spec, {}, false);
  REQUIRE(env.ok());
  CHECK_FALSE(env->active);
  CHECK(env->interrupted_by == 0);
}

TEST_CASE("prepare_python_env reports bad input before touching the cache", "[python_env]") {
  air::LaunchSpec spec;
  spec.env_cache_dir.value = "/nonexistent-air-run-cache";
  spec.dependencies.value = {"numpy", "-r x.txt"};
  auto bad = air::prepare_python_env(spec, {{"PATH", "/usr/bin:/bin"}}, false);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message ==
        "environment.dependencies: '-r x.txt': requirement file includes (-r/-c) are not supported; list the "
        "requirements themselves");
  spec.dependencies.value = {"numpy"};
  spec.python.value = "no-such-python-for-air-run";
  auto missing = air::prepare_python_env(spec, {{"PATH", "/usr/bin:/bin"}}, true);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().kind == air::ErrorKind::not_found);
  CHECK(missing.error().message.rfind("Python interpreter ", 0) == 0);
  spec.dependencies.value = {};
  spec.requirements_file.value = "/nonexistent/requirements.txt";
  auto unreadable = air::prepare_python_env(spec, {}, true);
  REQUIRE_FALSE(unreadable.ok());
  CHECK(unreadable.error().message.find("/nonexistent/requirements.txt") != std::string::npos);
}

TEST_CASE("env_cache_dir written in a spec file is relative to that file", "[python_env]") {
  air::LaunchSpec spec;
  spec.spec_path = "/proj/configs/job.yaml";
  spec.env_cache_dir.value = "../cache";
  spec.env_cache_dir.origin = air::Origin{air::Origin::Kind::file, "/proj/configs/job.yaml:3:1"};
  auto dir = air::env_cache_dir(spec, {});
  REQUIRE(dir.ok());
  CHECK(*dir == "/proj/cache");
  spec.env_cache_dir.origin = air::Origin{air::Origin::Kind::flag, "--env-cache-dir"};
  dir = air::env_cache_dir(spec, {});
  REQUIRE(dir.ok());
  CHECK(*dir != "/proj/cache");
  CHECK(dir->front() == '/');
}
