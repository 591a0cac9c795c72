// Rank result files: every state, and the documented protocol.
#include "core/os/atomic_file.hpp"
#include "core/report/collect.hpp"
#include "core/report/rank_result.hpp"
#include "core/run/error_file.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

using air::RankResult;
using air::test::TempDir;

TEST_CASE("result file states", "[results]") {
  TempDir dir;
  REQUIRE(!dir.path().empty());

  SECTION("missing file") {
    const RankResult r = air::read_rank_result(dir.file("nope.json"));
    CHECK(r.state == RankResult::State::missing);
    CHECK(air::to_string(r.state) == "missing");
    CHECK(r.error.empty());
  }
  SECTION("no result file planned") { CHECK(air::read_rank_result("").state == RankResult::State::missing); }
  SECTION("ok keeps the value and its key order") {
    const RankResult r = air::read_rank_result(dir.write("r.json", R"({"z": 1, "a": [true, null, "x"]})"));
    REQUIRE(r.state == RankResult::State::ok);
    CHECK(air::to_string(r.state) == "ok");
    CHECK(r.value.dump() == R"({"z":1,"a":[true,null,"x"]})");
    CHECK(r.size_bytes == 32);
  }
  SECTION("a scalar is a result") {
    const RankResult r = air::read_rank_result(dir.write("r.json", "3.5\n"));
    REQUIRE(r.state == RankResult::State::ok);
    CHECK(r.value.get<double>() == 3.5);
  }
  SECTION("invalid JSON keeps the parse error and the first 200 bytes") {
    const std::string text = R"({"a": })" + std::string(300, 'x');
    const RankResult r = air::read_rank_result(dir.write("r.json", text));
    REQUIRE(r.state == RankResult::State::invalid);
    CHECK(air::to_string(r.state) == "invalid");
    CHECK(r.error == "parse error at line 1, column 7: syntax error while parsing value - unexpected '}'; "
                     "expected '[', '{', or a literal");
    CHECK(r.excerpt == text.substr(0, 200));
    CHECK(r.value.is_null());
  }
  SECTION("two values are invalid") {
    const RankResult r = air::read_rank_result(dir.write("r.json", "1 2"));
    CHECK(r.state == RankResult::State::invalid);
    CHECK(r.excerpt == "1 2");
  }
  SECTION("an empty file is invalid") {
    const RankResult r = air::read_rank_result(dir.write("r.json", ""));
    CHECK(r.state == RankResult::State::invalid);
    CHECK(r.error == "the file is empty (expected one JSON value)");
  }
  SECTION("too large is reported without reading") {
    const std::string path = dir.write("r.json", "[" + std::string(100, ' ') + "]");
    const RankResult r = air::read_rank_result(path, 50);
    REQUIRE(r.state == RankResult::State::too_large);
    CHECK(air::to_string(r.state) == "too_large");
    CHECK(r.error == "result file is 102 bytes, over the limit of 50 bytes");
    CHECK(r.size_bytes == 102);
    CHECK(air::read_rank_result(path, 102).state == RankResult::State::ok);
  }
  SECTION("the default limit is 16 MiB") {
    CHECK(air::k_max_result_bytes == 16u * 1024 * 1024);
    const std::string path = dir.file("big.json");
    REQUIRE(::truncate(dir.write("big.json", "").c_str(), 16 * 1024 * 1024 + 1) == 0);
    const RankResult r = air::read_rank_result(path);
    CHECK(r.state == RankResult::State::too_large);
    CHECK(r.size_bytes == 16u * 1024 * 1024 + 1);
  }
  SECTION("a directory is invalid, not fatal") {
    std::filesystem::create_directory(dir.file("d"));
    const RankResult r = air::read_rank_result(dir.file("d"));
    CHECK(r.state == RankResult::State::invalid);
    CHECK(r.error == "cannot read " + dir.file("d") + ": not a regular file");
  }
  SECTION("a FIFO does not block") {
    REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
    const RankResult r = air::read_rank_result(dir.file("fifo"));
    CHECK(r.state == RankResult::State::invalid);
    CHECK(r.error == "cannot read " + dir.file("fifo") + ": not a regular file");
  }
}

TEST_CASE("the documented result-file protocol produces an ok result", "[results]") {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) {
    WARN("python3 not found; documented protocol check skipped");
    return;
  }
  // Runs the Python example from docs/summary-schema.md as written there.
  const std::string doc = air::test::read_all(AIR_TEST_DATA_DIR "/../docs/summary-schema.md");
  const auto start = doc.find("```python\n");
  REQUIRE(start != std::string::npos);
  const auto end = doc.find("```", start + 10);
  REQUIRE(end != std::string::npos);
  TempDir dir;
  const std::string script =
      dir.write("writer.py", doc.substr(start + 10, end - start - 10) + "write_result({\"loss\": 0.25})\n");
  const std::string result = dir.file("rank0.result.json");
  const std::string cmd = "AIR_RESULT_FILE='" + result + "' python3 '" + script + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const RankResult r = air::read_rank_result(result);
  REQUIRE(r.state == RankResult::State::ok);
  CHECK(r.value.dump() == R"({"loss":0.25})");
  int entries = 0; // the temporary file was renamed, not left behind
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 2);
}
