// The live status area's text (core/run/live_status.hpp).
#include "core/run/live_status.hpp"
#include "tests/unit/catch.hpp"

namespace {

constexpr std::uint64_t k_gib = 1024ULL * 1024 * 1024;

air::LiveSnapshot running_snapshot() {
  air::LiveSnapshot s;
  s.running = 3;
  s.exited = 1;
  s.failed = 0;
  s.elapsed_s = 65.4;
  s.left_s = 3 * 3600 - 65.4;
  return s;
}

} // namespace

TEST_CASE("live status: the head line says ranks and times", "[live_status]") {
  const auto lines = air::render_live_status(running_snapshot(), 120, false);
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "air-run: 3 running, 1 exited, 0 failed | 01:05 elapsed | 2:58:55 left");
}

TEST_CASE("live status: without a timeout no time left; while stopping the SIGKILL countdown",
          "[live_status]") {
  auto s = running_snapshot();
  s.left_s.reset();
  CHECK(air::render_live_status(s, 120, false)[0] ==
        "air-run: 3 running, 1 exited, 0 failed | 01:05 elapsed");
  s.stopping_s = 29.2;
  CHECK(air::render_live_status(s, 120, false)[0] ==
        "air-run: 3 running, 1 exited, 0 failed | 01:05 elapsed | stopping, SIGKILL in 00:30");
}

TEST_CASE("live status: the ranks' step and its rate once they count steps", "[live_status]") {
  auto s = running_snapshot();
  s.steps = 1200;
  CHECK(air::render_live_status(s, 120, false)[0] ==
        "air-run: 3 running, 1 exited, 0 failed | 01:05 elapsed | step 1200 | 2:58:55 left");
  s.steps_per_s = 3.456;
  CHECK(air::render_live_status(s, 120, false)[0] ==
        "air-run: 3 running, 1 exited, 0 failed | 01:05 elapsed | step 1200 (3.46/s) | 2:58:55 left");
}

TEST_CASE("live status: GPU readings, and what a fake GPU knows", "[live_status]") {
  auto s = running_snapshot();
  s.gpus.push_back({0, 87u, 40 * k_gib + k_gib / 10, 80 * k_gib, 65u});
  s.gpus.push_back({1, std::nullopt, std::nullopt, 24 * k_gib, std::nullopt});
  const auto lines = air::render_live_status(s, 120, false);
  REQUIRE(lines.size() == 2);
  CHECK(lines[1] == "gpu0 87% 40.1/80.0G 65C | gpu1 --% --/24.0G --C");
}

TEST_CASE("live status: every line is narrower than the terminal", "[live_status]") {
  auto s = running_snapshot();
  for (int i = 0; i < 8; ++i) s.gpus.push_back({i, 50u, 10 * k_gib, 80 * k_gib, 60u});
  for (const int width : {20, 40, 61, 80, 200}) {
    const auto lines = air::render_live_status(s, width, false);
    for (const auto& line : lines) {
      INFO(width << ": " << line);
      CHECK(line.size() < static_cast<std::size_t>(width));
    }
  }
  // 80 columns: three GPUs a line ("gpu0 50% 10.0/80.0G 60C" is 23 wide); the
  // last allowed GPU line keeps room to say how many it left out.
  const auto lines = air::render_live_status(s, 80, false, 2);
  REQUIRE(lines.size() == 3);
  CHECK(lines[1] == "gpu0 50% 10.0/80.0G 60C | gpu1 50% 10.0/80.0G 60C | gpu2 50% 10.0/80.0G 60C");
  CHECK(lines[2] == "gpu3 50% 10.0/80.0G 60C | gpu4 50% 10.0/80.0G 60C | +3 more");
}

TEST_CASE("live status: colour dims the area and reddens failures", "[live_status]") {
  auto s = running_snapshot();
  s.failed = 2;
  const auto lines = air::render_live_status(s, 120, true);
  CHECK(
      lines[0] ==
      "\x1b[2mair-run: 3 running, 1 exited, \x1b[0m\x1b[31m2 failed\x1b[0m\x1b[2m | 01:05 elapsed | 2:58:55 "
      "left\x1b[0m");
}

TEST_CASE("live status: erase and draw sequences", "[live_status]") {
  CHECK(air::erase_text(0).empty());
  CHECK(air::erase_text(1) == "\r\x1b[2K");
  CHECK(air::erase_text(3) == "\r\x1b[2K\x1b[1A\x1b[2K\x1b[1A\x1b[2K");
  CHECK(air::draw_text({"a", "b"}) == "a\nb");
  CHECK(air::clock_text(0) == "00:00");
  CHECK(air::clock_text(3599.9) == "59:59");
  CHECK(air::clock_text(36000) == "10:00:00");
}
