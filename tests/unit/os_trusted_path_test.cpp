// Hostile input and hostile neighbours: HMAC, JSON nesting, redaction, and the
// ownership checks on paths another local user could have written.
#include "core/base/json_depth.hpp"
#include "core/base/redact.hpp"
#include "core/base/sha256.hpp"
#include "core/os/file_read.hpp"
#include "core/os/log_sink.hpp"
#include "core/os/trusted_path.hpp"
#include "core/report/rank_result.hpp"
#include "core/run/error_file.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace {

using air::test::TempDir;

/// A uid that is neither us nor root: what another local user would own.
/// The tests run as root in CI, so ownership checks compare against
/// geteuid() and this uid, never against "not root".
constexpr uid_t k_stranger = 12345;

bool chown_to_stranger(const std::string& path) {
  return ::lchown(path.c_str(), k_stranger, k_stranger) == 0;
}

} // namespace

TEST_CASE("HMAC-SHA-256 matches RFC 4231", "[hardening]") {
  // Test case 2: key "Jefe".
  CHECK(air::hmac_sha256_hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block is hashed first.
  CHECK(air::hmac_sha256_hex(std::string(131, '\xaa'),
                             "Test Using Larger Than Block-Size Key - Hash Key First") ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  CHECK(air::equal_in_constant_time("abc", "abc"));
  CHECK_FALSE(air::equal_in_constant_time("abc", "abd"));
  CHECK_FALSE(air::equal_in_constant_time("abc", "ab"));
}

TEST_CASE("JSON nesting is measured outside strings and bounded", "[hardening]") {
  CHECK(air::json_nesting_depth(R"({"a": [1, {"b": []}]})") == 4);
  CHECK(air::json_nesting_depth(R"("[[[[\"[[[")") == 0);
  CHECK(air::json_nesting_depth(std::string(100'000, '['), 128) == 129);
  // 200 KB of nested arrays used to overflow the stack (exit 139).
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const air::RankResult r = air::parse_rank_result(deep);
  CHECK(r.state == air::RankResult::State::invalid);
  CHECK(r.error == "the value nests arrays or objects deeper than 128 levels");
  const air::ErrorFileRecord e = air::parse_error_file("{\"message\": " + deep + "}");
  CHECK(e.malformed);
  CHECK(air::parse_rank_result(std::string(100, '[') + std::string(100, ']')).state ==
        air::RankResult::State::ok);
}

TEST_CASE("one redaction rule for names and URLs", "[hardening]") {
  CHECK(air::redact_variable("HF_TOKEN", "hf_abc") == "<redacted>");
  CHECK(air::redact_variable("DATABASE_URL", "postgres://app:pw@db:5432/x") ==
        "postgres://app:<redacted>@db:5432/x");
  CHECK(air::redact_urls("https://bob:pw@example.com/simple") == "https://bob:<redacted>@example.com/simple");
  CHECK(air::redact_urls("https://tok@example.com/simple?x=a@b") ==
        "https://<redacted>@example.com/simple?x=a@b");
  CHECK(air::redact_urls("https://example.com/simple") == "https://example.com/simple");
  CHECK(air::redact_urls("a https://u:p@h b http://h2") == "a https://u:<redacted>@h b http://h2");
  CHECK(air::redact_urls("no url here") == "no url here");
}

TEST_CASE("paths another user could have written are refused", "[hardening]") {
  TempDir dir;
  REQUIRE(air::check_trusted_path(dir.path(), "log directory").ok());
  REQUIRE(air::check_trusted_contents(dir.path(), "cached environment").ok());

  SECTION("a directory writable by others, not sticky") {
    ::chmod(dir.path().c_str(), 0777);
    auto r = air::check_trusted_path(dir.path(), "log directory");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("is writable by other users (mode 0777)") != std::string::npos);
    ::chmod(dir.path().c_str(), 01777); // sticky, like /tmp: fine
    CHECK(air::check_trusted_path(dir.path(), "log directory").ok());
  }
  SECTION("a file owned by another user inside a tree") {
    const std::string sub = dir.file("bin");
    REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
    const std::string python = dir.write("bin/python", "#!/bin/sh\n");
    REQUIRE(chown_to_stranger(python));
    auto r = air::check_trusted_contents(dir.path(), "cached environment");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find(python + " is owned by uid 12345") != std::string::npos);
  }
  SECTION("a group-writable file") {
    const std::string f = dir.write("marker.json", "{}");
    ::chmod(f.c_str(), 0664);
    CHECK_FALSE(air::check_trusted_contents(dir.path(), "cached environment").ok());
  }
  SECTION("a parent directory owned by another user") {
    const std::string sub = dir.file("cache");
    REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
    REQUIRE(chown_to_stranger(dir.path()));
    auto r = air::check_trusted_tree_root(sub, "environment cache directory");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("its parent") != std::string::npos);
  }
}

TEST_CASE("files read back must be ones this run's ranks wrote", "[hardening]") {
  TempDir dir;
  const std::string secret = dir.write("secret", "{\"password\": \"hunter2\"}");
  const std::string link = dir.file("rank0.result.json");
  REQUIRE(::symlink(secret.c_str(), link.c_str()) == 0);
  const air::RankResult via_link = air::read_rank_result(link, 1 << 20);
  CHECK(via_link.state == air::RankResult::State::invalid);
  CHECK(via_link.error.find("a symlink") != std::string::npos);
  CHECK(via_link.value.is_null());

  const std::string planted = dir.write("rank1.result.json", "{\"loss\": 0}");
  REQUIRE(chown_to_stranger(planted));
  const air::RankResult foreign = air::read_rank_result(planted, 1 << 20);
  CHECK(foreign.state == air::RankResult::State::invalid);
  CHECK(foreign.error.find("owned by uid 12345") != std::string::npos);

  // The spec, a file the user names, may be a symlink.
  CHECK(air::read_small_file(link, 1 << 20).state == air::FileRead::State::ok);
}

TEST_CASE("log files are never written through planted names", "[hardening]") {
  TempDir dir;
  const std::string victim = dir.write("victim", "precious\n");
  const std::string link = dir.file("rank0.log");
  REQUIRE(::symlink(victim.c_str(), link.c_str()) == 0);
  auto opened = air::open_log_file(link);
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.error().message.find("is a symlink") != std::string::npos);

  const std::string hard = dir.file("rank1.log");
  REQUIRE(::link(victim.c_str(), hard.c_str()) == 0);
  CHECK_FALSE(air::open_log_file(hard).ok());

  const std::string foreign = dir.write("rank2.log", "theirs\n");
  REQUIRE(chown_to_stranger(foreign));
  CHECK_FALSE(air::open_log_file(foreign).ok());

  const std::string fifo = dir.file("rank3.log");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_FALSE(air::open_log_file(fifo).ok()); // fails at once instead of blocking

  std::ifstream in(victim);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "precious\n");

  const std::string own = dir.write("rank4.log", "old run\n");
  auto reused = air::open_log_file(own);
  REQUIRE(reused.ok());
  struct stat st {};
  REQUIRE(::stat(own.c_str(), &st) == 0);
  CHECK(st.st_size == 0); // our own old log is truncated, as before
}

TEST_CASE("stale files are removed, never devices", "[hardening]") {
  TempDir dir;
  const std::string stale = dir.write("rank0.result.json", "{\"old\": 1}");
  REQUIRE(air::remove_stale_file(stale, "result file").ok());
  CHECK(::access(stale.c_str(), F_OK) != 0);
  CHECK(air::remove_stale_file(stale, "result file").ok()); // missing is fine
  const std::string fifo = dir.file("rank1.result.json");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_FALSE(air::remove_stale_file(fifo, "result file").ok());
}
