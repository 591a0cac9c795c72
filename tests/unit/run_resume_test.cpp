// latest_checkpoint() against the checkpoint trees air.data's latest() is
// tested on too (tests/data/checkpoint_trees.json): the two must agree.
#include "core/run/resume.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace {

/// Writes one case's tree under `root` (a null value is a directory).
void build_tree(const std::string& root, const nlohmann::json& tree) {
  std::filesystem::create_directories(root);
  for (const auto& [path, content] : tree.items()) {
    const std::filesystem::path p = std::filesystem::path(root) / path;
    if (content.is_null()) {
      std::filesystem::create_directories(p);
      continue;
    }
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content.get<std::string>();
  }
}

} // namespace

TEST_CASE("latest_checkpoint picks what air.data.latest() picks, on every shared tree", "[resume]") {
  std::ifstream in(std::string(AIR_TEST_DATA_DIR) + "/data/checkpoint_trees.json");
  REQUIRE(in);
  const auto doc = nlohmann::json::parse(in);
  REQUIRE(doc["cases"].size() > 10);
  air::test::TempDir dir;
  int n = 0;
  for (const auto& c : doc["cases"]) {
    const std::string name = c["name"].get<std::string>();
    INFO(name);
    const std::string root = dir.file("case" + std::to_string(n++));
    if (!c.value("missing", false)) build_tree(root, c["tree"]);
    const auto found = air::latest_checkpoint(root);
    if (c["latest"].is_null()) {
      CHECK_FALSE(found.has_value());
    } else {
      REQUIRE(found.has_value());
      CHECK(*found == root + "/" + c["latest"].get<std::string>());
    }
  }
}

TEST_CASE("choose_resume_point sets AIR_RESUME_FROM on every rank, and removes it when there is none",
          "[resume]") {
  air::test::TempDir dir;
  air::LaunchPlan plan;
  plan.checkpoint_dir = dir.path();
  plan.ranks.resize(2);
  plan.ranks[1].env["AIR_RESUME_FROM"] = "/stale";
  air::choose_resume_point(plan);
  CHECK(plan.resume_from.empty());
  CHECK(plan.ranks[1].env.count("AIR_RESUME_FROM") == 0);

  std::filesystem::create_directories(dir.file("step-1"));
  dir.write("step-1/.metadata", "m");
  dir.write("step-1/.air-checkpoint", "{\"format\": 1, \"sequence\": 1}\n");
  air::choose_resume_point(plan);
  CHECK(plan.resume_from == dir.file("step-1"));
  for (const auto& rank : plan.ranks) CHECK(rank.env.at("AIR_RESUME_FROM") == dir.file("step-1"));

  air::LaunchPlan none; // no checkpoint directory: nothing is touched
  none.ranks.resize(1);
  none.ranks[0].env["AIR_RESUME_FROM"] = "/user's own";
  air::choose_resume_point(none);
  CHECK(none.ranks[0].env.at("AIR_RESUME_FROM") == "/user's own");
}

TEST_CASE("prepare_checkpoint_dir makes the path absolute, creates it, and names the origin when it cannot",
          "[resume]") {
  air::test::TempDir dir;
  air::Setting<std::string> setting;
  setting.value = dir.path() + "/a/../ckpt/";
  setting.origin = air::Origin{air::Origin::Kind::flag, "--checkpoint-dir"};
  REQUIRE(air::prepare_checkpoint_dir(setting, true).ok());
  CHECK(setting.value == dir.path() + "/ckpt");
  CHECK(std::filesystem::is_directory(setting.value));

  dir.write("file", "x");
  air::Setting<std::string> blocked;
  blocked.value = dir.file("file") + "/ckpt";
  blocked.origin = air::Origin{air::Origin::Kind::env, "AIR_RUN_CHECKPOINT_DIR"};
  const auto refused = air::prepare_checkpoint_dir(blocked, true);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().kind == air::ErrorKind::usage);
  CHECK(refused.error().message.find("checkpoint_dir (env AIR_RUN_CHECKPOINT_DIR)") != std::string::npos);

  air::Setting<std::string> relative; // a dry run: made absolute, not created
  relative.value = "rel-ckpt";
  REQUIRE(air::prepare_checkpoint_dir(relative, false).ok());
  CHECK(relative.value == (std::filesystem::current_path() / "rel-ckpt").string());
  CHECK_FALSE(std::filesystem::exists(relative.value));
}
