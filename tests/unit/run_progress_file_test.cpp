#include "core/run/progress.hpp"
#include "core/run/progress_watch.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace {

/// Writes one slot as a rank does (a store into its own mapping).
void rank_writes(const std::string& path, int slot, std::uint64_t value) {
  const int fd = ::open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  void* page = ::mmap(nullptr, air::k_progress_file_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(page != MAP_FAILED);
  std::memcpy(static_cast<char*>(page) + 8 * slot, &value, sizeof value);
  ::munmap(page, air::k_progress_file_size);
  ::close(fd);
}

} // namespace

TEST_CASE("a progress file reads what the rank counted", "[progress]") {
  air::test::TempDir dir;
  air::ProgressFile file;
  const std::string path = dir.file("rank0.progress");
  REQUIRE(file.create(path).empty());
  rank_writes(path, air::progress_slot::pid, 4242);
  rank_writes(path, air::progress_slot::steps, 37);
  const air::ProgressReading r = file.read();
  CHECK(r.lost.empty());
  CHECK(r.attached);
  CHECK(r.steps == 37);
}

TEST_CASE("a rank that truncates its progress file loses its counts and cannot fault air-run", "[progress]") {
  air::test::TempDir dir;
  air::ProgressFile file;
  const std::string path = dir.file("rank0.progress");
  REQUIRE(file.create(path).empty());
  rank_writes(path, air::progress_slot::steps, 5);
  REQUIRE(::truncate(path.c_str(), 0) == 0); // a mapping's next load would raise SIGBUS here
  const air::ProgressReading r = file.read();
  CHECK(r.lost == "its progress file was truncated");
  CHECK(r.steps == 0);
  CHECK_FALSE(r.attached);
  file.request_stop(7, 0); // writing to it harms nothing either
  file.request_flight_recorder();
}

TEST_CASE("a scribbled progress file is lost, not shown as 2^64-1 steps", "[progress]") {
  air::test::TempDir dir;
  const std::string path = dir.file("rank0.progress");
  SECTION("over the magic") {
    air::ProgressFile file;
    REQUIRE(file.create(path).empty());
    rank_writes(path, 0, 0xffffffffffffffffULL);
    CHECK(file.read().lost == "its progress file was overwritten");
  }
  SECTION("an impossible count") {
    air::ProgressFile file;
    REQUIRE(file.create(path).empty());
    rank_writes(path, air::progress_slot::pid, 1);
    rank_writes(path, air::progress_slot::steps, 0xffffffffffffffffULL);
    const air::ProgressReading r = file.read();
    CHECK(r.lost.find("impossible counts") != std::string::npos);
    CHECK(r.steps == 0);
  }
}

TEST_CASE("the progress watch gives up on a broken file once and says which rank", "[progress]") {
  air::test::TempDir dir;
  air::ProgressWatch watch(2);
  const std::string a = dir.file("rank0.progress");
  const std::string b = dir.file("rank1.progress");
  REQUIRE(watch.create(0, a).empty());
  REQUIRE(watch.create(1, b).empty());
  rank_writes(a, air::progress_slot::pid, 1);
  rank_writes(a, air::progress_slot::steps, 3);
  rank_writes(b, air::progress_slot::pid, 2);
  rank_writes(b, air::progress_slot::steps, 4);
  const auto now = std::chrono::steady_clock::now();
  watch.poll(now);
  CHECK(watch.take_lost().empty());
  REQUIRE(::truncate(b.c_str(), 0) == 0);
  watch.poll(now);
  const auto lost = watch.take_lost();
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].first == 1);
  CHECK(lost[0].second == "its progress file was truncated");
  CHECK_FALSE(watch.mapped(1));
  CHECK(watch.reading(1).steps == 0);
  CHECK(watch.reading(0).steps == 3);
  watch.poll(now);
  CHECK(watch.take_lost().empty()); // said once
}

TEST_CASE("air-run marks a page before it signals the rank itself", "[progress]") {
  // The rank's shim defers a SIGTERM it cannot tell from a scheduler's
  // unless this slot says the signal is air-run's own (air_run_progress.py).
  air::test::TempDir dir;
  air::ProgressFile file;
  const std::string path = dir.file("rank0.progress");
  REQUIRE(file.create(path).empty());
  const auto slot = [&path](int index) {
    std::uint64_t value = 0;
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(::pread(fd, &value, sizeof value, 8 * index) == static_cast<ssize_t>(sizeof value));
    ::close(fd);
    return value;
  };
  CHECK(slot(air::progress_slot::tearing_down) == 0);
  file.mark_tearing_down();
  CHECK(slot(air::progress_slot::tearing_down) == 1);
  CHECK(file.read().lost.empty());
}
