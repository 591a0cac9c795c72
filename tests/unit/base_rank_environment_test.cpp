#include "core/base/rank_environment.hpp"
#include "tests/unit/catch.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

/// The variables in the order for_each gives them, as NAME=value.
std::vector<std::string> variables_in_order(const air::RankEnvironment& env) {
  std::vector<std::string> out;
  env.for_each(
      [&out](const std::string& name, const std::string& value) { out.push_back(name + "=" + value); });
  return out;
}

} // namespace

TEST_CASE("RankEnvironment: each rank's own variables over one shared map", "[environment]") {
  const auto shared = std::make_shared<const air::Environment>(
      air::Environment{{"HOME", "/root"}, {"PATH", "/bin"}, {"WORLD_SIZE", "2"}});
  air::RankEnvironment r0(shared);
  air::RankEnvironment r1(shared);
  r0["RANK"] = "0";
  r1["RANK"] = "1";
  r1["PATH"] = "/opt/bin"; // overrides the shared value for rank 1 only
  r1.erase("HOME");        // hides a shared variable for rank 1 only

  CHECK(variables_in_order(r0) ==
        std::vector<std::string>{"HOME=/root", "PATH=/bin", "RANK=0", "WORLD_SIZE=2"});
  CHECK(variables_in_order(r1) == std::vector<std::string>{"PATH=/opt/bin", "RANK=1", "WORLD_SIZE=2"});
  CHECK(shared->at("PATH") == "/bin"); // the shared map is never written
  CHECK(shared->count("RANK") == 0);
  CHECK(r0.at("PATH") == "/bin");
  CHECK(r1.at("PATH") == "/opt/bin");
  CHECK(r0.count("HOME") == 1);
  CHECK(r1.count("HOME") == 0);
  CHECK(r1.get("HOME") == nullptr);
  CHECK_THROWS_AS(r1.at("HOME"), std::out_of_range);
  CHECK(r0.size() == 4);
  CHECK(r1.size() == 3);
  CHECK(r1.flat() == air::Environment{{"PATH", "/opt/bin"}, {"RANK", "1"}, {"WORLD_SIZE", "2"}});
}

TEST_CASE("RankEnvironment: operator[] and erase behave as std::map's", "[environment]") {
  const auto shared = std::make_shared<const air::Environment>(air::Environment{{"A", "shared"}});
  air::RankEnvironment env(shared);
  // A first write starts from the shared value, as a map copy would hold it.
  env["A"] += "+own";
  CHECK(env.at("A") == "shared+own");
  // Unset, then read through operator[]: back, empty (std::map inserts "").
  env.erase("A");
  CHECK(env.count("A") == 0);
  CHECK(env["A"].empty());
  CHECK(env.count("A") == 1);
  // A variable only the rank has goes away whole.
  env["OWN"] = "1";
  env.erase("OWN");
  CHECK(env.get("OWN") == nullptr);
  CHECK(variables_in_order(env) == std::vector<std::string>{"A="});
  // Copies share the shared part and keep their own apart.
  air::RankEnvironment copy = env;
  copy["B"] = "copy";
  CHECK(env.count("B") == 0);
  CHECK(copy.at("B") == "copy");
}

TEST_CASE("RankEnvironment: from a plain map, and empty", "[environment]") {
  air::RankEnvironment none;
  CHECK(none.empty());
  CHECK(none.get("PATH") == nullptr);
  CHECK(variables_in_order(none).empty());
  none["X"] = "1";
  CHECK(variables_in_order(none) == std::vector<std::string>{"X=1"});

  const air::Environment plain{{"B", "2"}, {"A", "1"}};
  const air::RankEnvironment from_map = plain;
  CHECK(variables_in_order(from_map) == std::vector<std::string>{"A=1", "B=2"});
  CHECK(from_map.flat() == plain);
}
