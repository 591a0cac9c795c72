#include "core/base/sha256.hpp"
#include "core/pyenv/python_env.hpp"
#include "tests/unit/catch.hpp"

#include <string>
#include <vector>

namespace {

std::string norm(const std::string& text) {
  auto r = air::normalise_requirement(text, "deps");
  INFO(text << " -> " << (r ? *r : r.error().message));
  REQUIRE(r.ok());
  return *r;
}

std::string norm_error(const std::string& text) {
  auto r = air::normalise_requirement(text, "deps");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().kind == air::ErrorKind::usage);
  return r.error().message;
}

air::EnvRequest request_with(std::vector<std::string> requirements) {
  air::EnvRequest req;
  req.interpreter = {"/usr/bin/python3.11", "/usr", "3.11.2 (main) [GCC 12.2.0]"};
  req.requirements = std::move(requirements);
  req.sources.find_links = {"/wheels"};
  req.sources.no_index = true;
  return req;
}

} // namespace

TEST_CASE("sha256 test vectors", "[python_env]") {
  CHECK(air::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(air::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(air::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Lengths around the padding boundary (55, 56, 64 bytes) take one or two tail blocks.
  CHECK(air::sha256_hex(std::string(55, 'a')) ==
        "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(air::sha256_hex(std::string(56, 'a')) ==
        "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(air::sha256_hex(std::string(64, 'a')) ==
        "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
  CHECK(air::sha256_hex(std::string(1'000'000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("requirements are normalised so equal spellings give one string", "[python_env]") {
  CHECK(norm("numpy") == "numpy");
  CHECK(norm("  NumPy  ") == "numpy");
  CHECK(norm("Foo_Bar.baz--x") == "foo-bar-baz-x");
  CHECK(norm("torch >= 2.0 , < 3") == "torch>=2.0,<3");
  CHECK(norm("Foo [ Extra1 , extra2 ] == 1.0") == "foo[extra1,extra2]==1.0");
  CHECK(norm("foo; python_version  <  \"3.12\"") == "foo ; python_version < \"3.12\"");
  CHECK(norm("foo>=1 ;python_version<'3.12'") == "foo>=1 ; python_version<'3.12'");
  CHECK(norm("Pkg @ https://example.com/Pkg-1.0.whl") == "pkg @ https://example.com/Pkg-1.0.whl");
  CHECK(norm("pkg@file:///w/Pkg.whl ; sys_platform == 'linux'") ==
        "pkg @ file:///w/Pkg.whl ; sys_platform == 'linux'");
  // Paths and URLs are not names: kept as written, blanks collapsed.
  CHECK(norm("./Wheels/Pkg-1.0-py3-none-any.whl") == "./Wheels/Pkg-1.0-py3-none-any.whl");
  CHECK(norm("/abs/Pkg-1.0-py3-none-any.whl") == "/abs/Pkg-1.0-py3-none-any.whl");
  CHECK(norm("git+https://host/Repo.git") == "git+https://host/Repo.git");
}

TEST_CASE("requirement errors name the place", "[python_env]") {
  CHECK(norm_error("   ") == "deps: empty requirement");
  CHECK(norm_error("-r other.txt") ==
        "deps: '-r other.txt': requirement file includes (-r/-c) are not supported; list the requirements "
        "themselves");
  CHECK(norm_error("--constraint=c.txt") ==
        "deps: '--constraint=c.txt': requirement file includes (-r/-c) are not supported; list the "
        "requirements themselves");
  CHECK(norm_error("--index-url http://x") ==
        "deps: '--index-url http://x': pip options are not supported in requirements; use "
        "environment.find_links, environment.index_url or environment.no_index");
}

TEST_CASE("a list is sorted and deduplicated", "[python_env]") {
  auto r = air::normalise_requirements({"torch>=2", "Numpy", "numpy", "a_b"}, "environment.dependencies");
  REQUIRE(r.ok());
  CHECK(*r == std::vector<std::string>{"a-b", "numpy", "torch>=2"});
  auto bad = air::normalise_requirements({"ok", ""}, "environment.dependencies");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "environment.dependencies: empty requirement");
}

TEST_CASE("requirements files: comments, blanks, continuations, errors with line numbers", "[python_env]") {
  const std::string text = "# pinned versions\r\n"
                           "\n"
                           "Torch >= 2.0   # the big one\n"
                           "numpy\\\n"
                           "  ==1.26\n"
                           "url#frag-stays\n"
                           "   \n"
                           "numpy==1.26";
  auto r = air::parse_requirements_text(text, "req.txt");
  REQUIRE(r.ok());
  CHECK(*r == std::vector<std::string>{"numpy==1.26", "torch>=2.0", "url#frag-stays"});

  auto empty = air::parse_requirements_text("# nothing\n\n", "req.txt");
  REQUIRE(empty.ok());
  CHECK(empty->empty());

  auto include = air::parse_requirements_text("numpy\n\n-c constraints.txt\n", "req.txt");
  REQUIRE_FALSE(include.ok());
  CHECK(include.error().message ==
        "req.txt:3: '-c constraints.txt': requirement file includes (-r/-c) are not supported; list the "
        "requirements themselves");
  auto continued = air::parse_requirements_text("numpy\n-e \\\n ./local\n", "req.txt");
  REQUIRE_FALSE(continued.ok());
  CHECK(continued.error().message.rfind("req.txt:2: '-e ./local': pip options are not supported", 0) == 0);
}

TEST_CASE("list and requirements-file forms give the same key", "[python_env]") {
  auto from_list = air::normalise_requirements({"torch >= 2.0", "NumPy==1.26"}, "environment.dependencies");
  auto from_file = air::parse_requirements_text("# deps\nnumpy == 1.26\ntorch>=2.0  # gpu\n", "req.txt");
  REQUIRE(from_list.ok());
  REQUIRE(from_file.ok());
  CHECK(*from_list == *from_file);
  CHECK(air::env_key(request_with(*from_list)) == air::env_key(request_with(*from_file)));
}

TEST_CASE("the key covers interpreter, requirements, sources and site packages", "[python_env]") {
  const air::EnvRequest base = request_with({"numpy"});
  const std::string key = air::env_key(base);
  CHECK(key.size() == 64);
  CHECK(key == air::sha256_hex(air::env_key_text(base)));
  CHECK(air::short_key(key) == key.substr(0, 12));
  CHECK(air::env_key_text(base) == "air-run-env 1\n"
                                   "python /usr/bin/python3.11\n"
                                   "prefix /usr\n"
                                   "version 3.11.2 (main) [GCC 12.2.0]\n"
                                   "system_site_packages true\n"
                                   "no_index true\n"
                                   "index_url \n"
                                   "find_links /wheels\n"
                                   "requirement numpy\n");
  auto changed = [&](auto&& edit) {
    air::EnvRequest other = base;
    edit(other);
    return air::env_key(other) != key;
  };
  CHECK(changed([](air::EnvRequest& r) { r.interpreter.path = "/opt/py/bin/python3.11"; }));
  CHECK(changed([](air::EnvRequest& r) { r.interpreter.prefix = "/opt/py"; }));
  CHECK(changed([](air::EnvRequest& r) { r.interpreter.version = "3.11.3"; }));
  CHECK(changed([](air::EnvRequest& r) { r.requirements.push_back("torch"); }));
  CHECK(changed([](air::EnvRequest& r) { r.sources.find_links.clear(); }));
  CHECK(changed([](air::EnvRequest& r) { r.sources.index_url = "http://mirror/simple"; }));
  CHECK(changed([](air::EnvRequest& r) { r.sources.no_index = false; }));
  CHECK(changed([](air::EnvRequest& r) { r.system_site_packages = false; }));
  CHECK_FALSE(changed([](air::EnvRequest&) {}));
}

TEST_CASE("find-links entries become absolute, URLs stay", "[python_env]") {
  CHECK(air::absolute_link("wheels", "/home/u/job") == "/home/u/job/wheels");
  CHECK(air::absolute_link("./a/../wheels/", "/home/u/job") == "/home/u/job/wheels");
  CHECK(air::absolute_link("/srv/wheels", "/home/u") == "/srv/wheels");
  CHECK(air::absolute_link("https://host/Wheels/", "/home/u") == "https://host/Wheels/");
  CHECK(air::absolute_link("file:///srv/w", "/home/u") == "file:///srv/w");
}

TEST_CASE("interpreter probe and its output", "[python_env]") {
  const auto argv = air::interpreter_probe_argv("python3");
  REQUIRE(argv.size() == 4);
  CHECK(argv[0] == "python3");
  CHECK(argv[1] == "-S");
  auto id = air::parse_probe_output("/usr\n3.11.2 (main, Apr 28 2025) [GCC 12.2.0]\n", "/usr/bin/python3.11");
  REQUIRE(id.ok());
  CHECK(id->path == "/usr/bin/python3.11");
  CHECK(id->prefix == "/usr");
  CHECK(id->version == "3.11.2 (main, Apr 28 2025) [GCC 12.2.0]");
  for (const char* bad : {"", "/usr\n", "\n3.11\n", "/usr\n3.11\nextra\n", "/usr\n3.11"}) {
    auto r = air::parse_probe_output(bad, "/x/python");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.rfind(
              "environment.python /x/python: unexpected output when asked for its version", 0) == 0);
  }
}

TEST_CASE("the build plan: venv, then pip from the given sources", "[python_env]") {
  air::EnvRequest req = request_with({"numpy", "torch>=2"});
  req.sources.find_links = {"/w1", "/w2"};
  req.sources.index_url = "http://mirror/simple";
  const auto plan = air::plan_env_build(req, "/usr/bin/python3", "/c/.store/k-1");
  CHECK(plan.create == std::vector<std::string>{"/usr/bin/python3", "-m", "venv", "--system-site-packages",
                                                "/c/.store/k-1"});
  CHECK(plan.requirements_file == "/c/.store/k-1/air-run-requirements.txt");
  CHECK(plan.requirements_text == "numpy\ntorch>=2\n");
  CHECK(plan.install == std::vector<std::string>{"/c/.store/k-1/bin/python", "-m", "pip", "install",
                                                 "--disable-pip-version-check", "--no-input", "--no-index",
                                                 "--find-links", "/w1", "--find-links", "/w2", "--index-url",
                                                 "http://mirror/simple", "-r",
                                                 "/c/.store/k-1/air-run-requirements.txt"});
  req.system_site_packages = false;
  req.sources = {};
  const auto isolated = air::plan_env_build(req, "python3", "/d");
  CHECK(isolated.create == std::vector<std::string>{"python3", "-m", "venv", "/d"});
  CHECK(isolated.install == std::vector<std::string>{"/d/bin/python", "-m", "pip", "install",
                                                     "--disable-pip-version-check", "--no-input", "-r",
                                                     "/d/air-run-requirements.txt"});
}
