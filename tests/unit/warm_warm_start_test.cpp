#include "core/os/spawn_request.hpp"
#include "core/warm/warm_start.hpp"
#include "tests/unit/catch.hpp"

#include <memory>
#include <string>
#include <vector>

namespace {

/// The request's NUL-terminated fields, as the interpreter splits them.
std::vector<std::string> fields(const std::string& request) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (std::size_t nul = request.find('\0'); nul != std::string::npos; nul = request.find('\0', from)) {
    out.push_back(request.substr(from, nul - from));
    from = nul + 1;
  }
  CHECK(from == request.size()); // the last field ends the request
  return out;
}

} // namespace

TEST_CASE("the warm start forks python scripts and modules, nothing else", "[warm_start]") {
  const std::string py = "/usr/bin/python3";
  CHECK(air::warm_start_accepts({py, "-u", "train.py", "--lr", "1"}, py));
  CHECK(air::warm_start_accepts({py, "train.py"}, py));
  CHECK(air::warm_start_accepts({py, "-u", "-m", "pkg.train", "-x"}, py));
  CHECK_FALSE(air::warm_start_accepts({py, "-u", "-m"}, py));             // no module
  CHECK_FALSE(air::warm_start_accepts({py, "-u", "-m", "-x"}, py));       // an option, no module
  CHECK_FALSE(air::warm_start_accepts({py, "-u", "-c", "print(1)"}, py)); // -c and other options start fresh
  CHECK_FALSE(air::warm_start_accepts({py, "-X", "dev", "train.py"}, py));
  CHECK_FALSE(air::warm_start_accepts({py, "-u"}, py));
  CHECK_FALSE(air::warm_start_accepts({"./train.sh"}, py));
  CHECK_FALSE(air::warm_start_accepts({"/opt/other/python", "train.py"}, py)); // another interpreter
}

TEST_CASE("the interpreter starts with the variables every rank shares", "[warm_start]") {
  const air::Environment r0 = {{"PATH", "/bin"}, {"RANK", "0"}, {"PYTHONPATH", "/shim"}, {"ONLY0", "x"}};
  const air::Environment r1 = {{"PATH", "/bin"}, {"RANK", "1"}, {"PYTHONPATH", "/shim"}};
  using Envs = std::vector<const air::Environment*>;
  CHECK(air::common_environment(Envs{&r0, &r1}) ==
        air::Environment{{"PATH", "/bin"}, {"PYTHONPATH", "/shim"}});
  CHECK(air::common_environment(Envs{&r0}) == r0);
  CHECK(air::common_environment(std::vector<const air::Environment*>{}).empty());
}

TEST_CASE("a fork request carries every byte of argv and of what the rank changes", "[warm_start]") {
  const std::string odd = "caf\xc3\xa9 \xff raw"; // not UTF-8 throughout
  const auto f = fields(air::warm_start_request(4242, "/work dir", true, 1, {0, 2, 5},
                                                {"/usr/bin/python3", "-u", "t.py", odd, ""},
                                                {{"A", "1=2"}, {"DROP", std::nullopt}, {"EMPTY", ""}}));
  REQUIRE(f.size() == 16);
  CHECK(f[0] == "air-run-warm-2");
  CHECK(f[1] == "4242");
  CHECK(f[2] == "/work dir");
  CHECK(f[3] == "1");
  CHECK(f[4] == "1");
  CHECK(f[5] == "0,2,5");
  CHECK(f[6] == "5");
  CHECK(f[7] == "/usr/bin/python3");
  CHECK(f[10] == odd);
  CHECK(f[11].empty()); // an empty argument stays one
  CHECK(f[12] == "2");  // two variables set, then the names unset
  CHECK(f[13] == "A=1=2");
  CHECK(f[14] == "EMPTY="); // set empty, not unset
  CHECK(f[15] == "DROP");
  const auto unbound = fields(air::warm_start_request(1, "/", false, -1, {}, {"p", "s.py"}, {}));
  CHECK(unbound[3] == "0");
  CHECK(unbound[4] == "-1");
  CHECK(unbound[5].empty());
  CHECK(unbound.size() == 10); // nothing changed: the count 0 and no variable
  CHECK(unbound[9] == "0");
}

TEST_CASE("a rank's changes are what it adds, changes and lacks of the interpreter's", "[warm_start]") {
  const air::Environment base = {{"HOME", "/root"}, {"KEEP", "1"}, {"OLD", "x"}, {"PORT", "100"}};
  const air::Environment rank = {{"HOME", "/root"}, {"KEEP", "1"}, {"PORT", "200"}, {"RANK", "0"}};
  CHECK(air::environment_changes(base, rank) ==
        air::EnvironmentChanges{{"OLD", std::nullopt}, {"PORT", "200"}, {"RANK", "0"}});
  CHECK(air::environment_changes(base, base).empty());
  CHECK(air::environment_changes({}, {{"A", ""}}) == air::EnvironmentChanges{{"A", ""}});
  CHECK(air::environment_changes({{"A", ""}}, {}) == air::EnvironmentChanges{{"A", std::nullopt}});
}

TEST_CASE("a rank's changes come from its shared part's, worked out once, and its own", "[warm_start]") {
  const air::Environment base = {{"HOME", "/root"}, {"KEEP", "1"}, {"OLD", "x"}, {"PORT", "100"}};
  auto shared = std::make_shared<const air::Environment>(
      air::Environment{{"HOME", "/root"}, {"KEEP", "1"}, {"NODE", "n1"}, {"OLD", "x"}, {"PORT", "100"}});
  const auto of_shared = air::environment_changes(base, *shared);
  CHECK(of_shared == air::EnvironmentChanges{{"NODE", "n1"}});
  air::RankEnvironment rank(shared);
  rank["RANK"] = "1";           // new
  rank["PORT"] = "200";         // changed
  rank.erase("OLD");            // unset
  rank["KEEP"] = "1";           // set to what the interpreter has: no change
  rank.erase("NODE");           // the shared part's addition, taken back
  rank["HOME"] = "/home/other"; // changed, then back below
  rank["HOME"] = "/root";
  const auto changes = air::environment_changes(base, rank, of_shared);
  CHECK(changes == air::EnvironmentChanges{{"OLD", std::nullopt}, {"PORT", "200"}, {"RANK", "1"}});
  // Whatever the route, the same as comparing the whole environments.
  CHECK(changes == air::environment_changes(base, rank.flat()));
}

TEST_CASE("ranks that share one map have in common that map less what their own change", "[warm_start]") {
  auto shared = std::make_shared<const air::Environment>(
      air::Environment{{"PATH", "/bin"}, {"PYTHONPATH", "/shim"}, {"RESUME", "stale"}, {"SAME", "a"}});
  air::RankEnvironment r0(shared), r1(shared);
  r0["RANK"] = "0";
  r1["RANK"] = "1";
  r0["OMP_NUM_THREADS"] = r1["OMP_NUM_THREADS"] = "1"; // own, equal on every rank: common
  r0.erase("RESUME");                                  // unset on one rank only: not common
  r1["SAME"] = "a";                                    // own but equal to the shared value
  const air::Environment expected = {
      {"OMP_NUM_THREADS", "1"}, {"PATH", "/bin"}, {"PYTHONPATH", "/shim"}, {"SAME", "a"}};
  CHECK(air::common_environment(std::vector<const air::RankEnvironment*>{&r0, &r1}) == expected);
  // The same as from the merged environments.
  const air::Environment f0 = r0.flat(), f1 = r1.flat();
  CHECK(air::common_environment(std::vector<const air::Environment*>{&f0, &f1}) == expected);
  // Ranks with maps of their own: merged, then compared.
  const air::RankEnvironment own0(f0), own1(f1);
  CHECK(air::common_environment(std::vector<const air::RankEnvironment*>{&own0, &own1}) == expected);
  CHECK(air::common_environment(std::vector<const air::RankEnvironment*>{}).empty());
}

TEST_CASE("the interpreter's program carries the spawn's set-up error codes", "[warm_start]") {
  const std::string program = air::warm_start_program();
  CHECK(program.find("%FAILED") == std::string::npos);
  CHECK(program.find("_FAILED_CHDIR = " + std::to_string(air::k_failed_chdir) + "\n") != std::string::npos);
  CHECK(program.find("_FAILED_AFFINITY = " + std::to_string(air::k_failed_affinity) + "\n") !=
        std::string::npos);
  CHECK(program.find("_FAILED_MEMPOLICY = " + std::to_string(air::k_failed_mempolicy) + "\n") !=
        std::string::npos);
  CHECK(program.find("\"air-run-warm-2\"") != std::string::npos); // the version the requests carry
}

TEST_CASE("the warm start reads -u and the target's name from the command line", "[warm_start]") {
  const std::string py = "/usr/bin/python3";
  const auto script = air::warm_target({py, "-u", "train.py", "--lr", "1"}, py);
  REQUIRE(script);
  CHECK(script->unbuffered);
  CHECK(script->name == "train.py");
  const auto module = air::warm_target({py, "-m", "pkg.train"}, py);
  REQUIRE(module);
  CHECK_FALSE(module->unbuffered);
  CHECK(module->name == "pkg.train");
}
