// Atomic file writes: readers see the old file or the whole new one.
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

TEST_CASE("atomic write", "[results]") {
  TempDir dir;
  const std::string path = dir.file("summary.json");
  SECTION("creates the file with exact content and no temp file left") {
    std::string content = "{\"a\": 1}\n";
    content += std::string("\0binary\xff", 8);
    REQUIRE(air::write_file_atomically(path, content).ok());
    CHECK(air::test::read_all(path) == content);
    int entries = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      CHECK(e.path().filename() == "summary.json");
      ++entries;
    }
    CHECK(entries == 1);
  }
  SECTION("replaces an existing file") {
    dir.write("summary.json", std::string(10000, 'o'));
    REQUIRE(air::write_file_atomically(path, "new").ok());
    CHECK(air::test::read_all(path) == "new");
  }
  SECTION("large content") {
    const std::string big(5 * 1024 * 1024 + 7, 'z');
    REQUIRE(air::write_file_atomically(path, big).ok());
    CHECK(air::test::read_all(path) == big);
  }
  SECTION("mode follows the umask") {
    const mode_t old = ::umask(022);
    REQUIRE(air::write_file_atomically(path, "x").ok());
    ::umask(old);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0644);
  }
  SECTION("a missing directory is an error naming the path and call") {
    const std::string bad = dir.file("no/such/summary.json");
    const air::Status s = air::write_file_atomically(bad, "x");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().kind == air::ErrorKind::system);
    CHECK(s.error().message == "cannot write " + bad + ": open: No such file or directory");
  }
  SECTION("a failed rename leaves no temp file and keeps the old one") {
    std::filesystem::create_directory(dir.file("target"));
    dir.write("target/keep", "k");
    const air::Status s = air::write_file_atomically(dir.file("target"), "x");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message == "cannot write " + dir.file("target") + ": rename: Is a directory");
    int entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
    CHECK(entries == 1);
    CHECK(air::test::read_all(dir.file("target/keep")) == "k");
  }
  SECTION("an empty path is refused") {
    CHECK(air::write_file_atomically("", "x").error().message == "cannot write a file with an empty path");
  }
}
