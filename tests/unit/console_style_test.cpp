// Colour decisions and rank prefixes.
#include "core/run/console_style.hpp"
#include "tests/unit/catch.hpp"

TEST_CASE("console style: colour only on a terminal, and the user's word wins", "[console_style]") {
  CHECK(air::use_color(true, {{"TERM", "xterm-256color"}}));
  CHECK_FALSE(air::use_color(false, {{"TERM", "xterm-256color"}}));
  CHECK_FALSE(air::use_color(true, {{"TERM", "dumb"}}));
  CHECK_FALSE(air::use_color(true, {{"NO_COLOR", "1"}}));
  CHECK(air::use_color(false, {{"FORCE_COLOR", "1"}}));
  CHECK_FALSE(air::use_color(false, {{"FORCE_COLOR", "0"}}));
  CHECK_FALSE(air::use_color(true, {{"NO_COLOR", "1"}, {"FORCE_COLOR", "1"}}));
  CHECK(air::use_color(true, {{"NO_COLOR", ""}})); // an empty NO_COLOR is unset
}

TEST_CASE("console style: rank prefixes", "[console_style]") {
  CHECK(air::rank_prefix(3, false) == "[rank3]: ");
  CHECK(air::rank_prefix(0, true) == "\x1b[36m[rank0]:\x1b[0m ");
  CHECK(air::rank_prefix(1, true) == "\x1b[32m[rank1]:\x1b[0m ");
  CHECK(air::rank_prefix(6, true) == "\x1b[36m[rank6]:\x1b[0m "); // six colours, then round again
  CHECK(air::rank_prefix(0, true) != air::rank_prefix(1, true));
}

TEST_CASE("console style: painted text, only in colour", "[console_style]") {
  CHECK(air::paint("air-run: note\n", air::Paint::dim, true) == "\x1b[2mair-run: note\x1b[0m\n");
  CHECK(air::paint("root cause", air::Paint::red, true) == "\x1b[31mroot cause\x1b[0m");
  CHECK(air::paint("air-run: note\n", air::Paint::dim, false) == "air-run: note\n");
  CHECK(air::paint("", air::Paint::red, true).empty());
}

TEST_CASE("console style: clock stamps", "[console_style]") {
  const auto t = std::chrono::system_clock::now();
  const std::string stamp = air::clock_stamp(t);
  REQUIRE(stamp.size() == 13); // "HH:MM:SS.mmm "
  CHECK(stamp[2] == ':');
  CHECK(stamp[5] == ':');
  CHECK(stamp[8] == '.');
  CHECK(stamp.back() == ' ');
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count() % 1000;
  CHECK(std::stoi(stamp.substr(9, 3)) == ms);
}
