#include "core/base/line_splitter.hpp"
#include "tests/unit/catch.hpp"

#include <string>
#include <vector>

namespace {

/// Feeds `chunks` one by one, then finishes; returns every delivered line.
std::vector<std::string> split(const std::vector<std::string>& chunks, std::size_t max_line = 1 << 20) {
  air::LineSplitter splitter(max_line);
  std::vector<std::string> lines;
  const auto collect = [&](std::string_view line) { lines.emplace_back(line); };
  for (const auto& c : chunks) splitter.feed(c, collect);
  splitter.finish(collect);
  return lines;
}

using Lines = std::vector<std::string>;

} // namespace

TEST_CASE("line splitter: whole lines in one chunk", "[line_splitter]") {
  CHECK(split({"a\nbb\nccc\n"}) == Lines{"a", "bb", "ccc"});
}

TEST_CASE("line splitter: empty lines are kept", "[line_splitter]") {
  CHECK(split({"\n\nx\n\n"}) == Lines{"", "", "x", ""});
}

TEST_CASE("line splitter: a line spanning several chunks", "[line_splitter]") {
  CHECK(split({"hel", "lo wo", "rld\nnext", "\n"}) == Lines{"hello world", "next"});
  CHECK(split({"a", "\n"}) == Lines{"a"});
  CHECK(split({"a\nb", "", "c\n"}) == Lines{"a", "bc"});
}

TEST_CASE("line splitter: byte-by-byte feeding gives the same lines", "[line_splitter]") {
  const std::string text = "one\ntwo\n\nthree";
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  CHECK(split(bytes) == Lines{"one", "two", "", "three"});
}

TEST_CASE("line splitter: a partial last line is delivered at finish", "[line_splitter]") {
  air::LineSplitter splitter;
  Lines lines;
  const auto collect = [&](std::string_view line) { lines.emplace_back(line); };
  splitter.feed("done\nno newline at end", collect);
  CHECK(lines == Lines{"done"});
  CHECK(splitter.has_partial());
  splitter.finish(collect);
  CHECK(lines == Lines{"done", "no newline at end"});
  CHECK_FALSE(splitter.has_partial());
  splitter.finish(collect); // nothing pending: no extra empty line
  CHECK(lines.size() == 2);
}

TEST_CASE("line splitter: over-long lines come out in max-size pieces", "[line_splitter]") {
  // 10 bytes with max 4: pieces of 4, 4, 2; the newline adds no empty line.
  CHECK(split({"0123456789\nok\n"}, 4) == Lines{"0123", "4567", "89", "ok"});
  // Exactly max bytes then newline: one line, no empty piece after it.
  CHECK(split({"0123\nok\n"}, 4) == Lines{"0123", "ok"});
  CHECK(split({"01234567\n"}, 4) == Lines{"0123", "4567"});
  // The same, built across chunks.
  CHECK(split({"01", "23", "45", "67", "\n", "x\n"}, 4) == Lines{"0123", "4567", "x"});
  CHECK(split({"012", "3456789"}, 4) == Lines{"0123", "4567", "89"});
  // A genuine empty line after a split line is still an empty line.
  CHECK(split({"01234\n\n"}, 4) == Lines{"0123", "4", ""});
}

TEST_CASE("line splitter: the default cap is 1 MiB", "[line_splitter]") {
  const std::string big(std::size_t{1} << 20, 'a');
  const Lines lines = split({big + "b\n"});
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == big);
  CHECK(lines[1] == "b");
}
