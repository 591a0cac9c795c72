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
