// How a rank's line is drawn on a terminal (core/run/terminal_line).
#include "core/run/terminal_line.hpp"
#include "tests/unit/catch.hpp"

TEST_CASE("visible_line keeps what the terminal shows after the last carriage return", "[terminal]") {
  CHECK(air::visible_line("  5%|#    |\r 50%|###  |") == " 50%|###  |");
  CHECK(air::visible_line("done\r") == "done"); // a "\r\n" ending does not blank it
  CHECK(air::visible_line("plain") == "plain");
  CHECK(air::visible_line("\r") == "");
  // rich's erase and cursor codes go, colour stays.
  CHECK(air::visible_line("\x1b[?25l\r\x1b[2K\x1b[32mok\x1b[0m 3/4") == "\x1b[32mok\x1b[0m 3/4");
  CHECK(air::visible_line("a\x1b]8;;http://x\x07link\x1b]8;;\x07") == "alink");
}

TEST_CASE("append_visible_line appends what visible_line gives", "[terminal]") {
  std::string out = "[rank0]: ";
  air::append_visible_line(out, "plain");
  CHECK(out == "[rank0]: plain");
  for (const char* raw :
       {"  5%|#    |\r 50%|###  |", "done\r", "\r", "", "\x1b[?25l\r\x1b[2K\x1b[32mok\x1b[0m 3/4",
        "a\x1b]8;;http://x\x07link\x1b]8;;\x07", "\x1b[32mgreen\x1b[0m and \x1b[1mbold\x1b[0m\x1b[K"}) {
    out = "> ";
    air::append_visible_line(out, raw);
    CHECK(out == "> " + air::visible_line(raw));
  }
  CHECK(air::visible_line("\x1b[32mgreen\x1b[0m and \x1b[1mbold\x1b[0m\x1b[K") ==
        "\x1b[32mgreen\x1b[0m and \x1b[1mbold\x1b[0m");
}

TEST_CASE("fit_columns cuts by characters on screen, colour codes free", "[terminal]") {
  CHECK(air::fit_columns("abcdef", 4) == "abcd");
  CHECK(air::fit_columns("abc", 4) == "abc");
  CHECK(air::fit_columns("\x1b[36m[r0]:\x1b[0m abcdef", 8) == "\x1b[36m[r0]:\x1b[0m ab\x1b[0m");
  CHECK(air::fit_columns("\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88", 2) == "\xe2\x96\x88\xe2\x96\x88"); // "███"
  CHECK(air::visible_width("\x1b[36m[rank0]:\x1b[0m \xe2\x96\x88") == 10);
}
