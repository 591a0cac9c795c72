// core/base/text: strip_control_characters, whose clean stretches are tested eight bytes at a time.
#include "core/base/text.hpp"
#include "tests/unit/catch.hpp"

#include <string>

TEST_CASE("strip_control_characters replaces each control wherever it falls in a block of eight", "[text]") {
  const std::string clean = "0123456789 abcdefghijklmnopqrstuvwxyz ~!@#$%^&*()_+";
  CHECK(air::strip_control_characters(clean) == clean);
  for (std::size_t at = 0; at < clean.size(); ++at) {
    for (const char c : {'\x00', '\x1b', '\x1f', '\x7f', '\r'}) {
      std::string line = clean;
      line[at] = c;
      std::string expected = clean;
      expected[at] = '?';
      CHECK(air::strip_control_characters(line) == expected);
    }
    // A C1 control (U+0080..U+009F, two bytes in UTF-8) becomes one '?'.
    std::string c1 = clean;
    c1.replace(at, 1, "\xc2\x9b");
    std::string expected = clean;
    expected[at] = '?';
    CHECK(air::strip_control_characters(c1) == expected);
  }
  // Other UTF-8 stays, and line breaks stay where asked.
  CHECK(air::strip_control_characters("caf\xc3\xa9 \xc2\xa0ok 12345678") ==
        "caf\xc3\xa9 \xc2\xa0ok 12345678");
  CHECK(air::strip_control_characters("line one\nline two\ttab", air::LineBreaks::keep) ==
        "line one\nline two\ttab");
  CHECK(air::strip_control_characters("line one\nline two\ttab") == "line one?line two?tab");
}
