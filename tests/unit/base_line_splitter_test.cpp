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

namespace {

/// Feeds `chunks` through feed_block, then finishes; returns every line, in
/// order, whether it came through the callback or in a block.
std::vector<std::string> split_in_blocks(const std::vector<std::string>& chunks,
                                         std::size_t max_line = 1 << 20) {
  air::LineSplitter splitter(max_line);
  std::vector<std::string> lines;
  const auto collect = [&](std::string_view line) { lines.emplace_back(line); };
  for (const auto& c : chunks) {
    std::string_view block = splitter.feed_block(c, collect);
    CHECK((block.empty() || block.back() == '\n'));
    while (!block.empty()) {
      const auto newline = block.find('\n');
      lines.emplace_back(block.substr(0, newline));
      block.remove_prefix(newline + 1);
    }
  }
  splitter.finish(collect);
  return lines;
}

} // namespace

TEST_CASE("line splitter: a block holds the whole lines after a held-over one", "[line_splitter]") {
  air::LineSplitter splitter;
  std::vector<std::string> called;
  const auto collect = [&](std::string_view line) { called.emplace_back(line); };
  CHECK(splitter.feed_block("a\nbb\nc", collect) == "a\nbb\n"); // no held-over line: all in the block
  CHECK(called.empty());
  CHECK(splitter.partial() == "c");
  CHECK(splitter.feed_block("c\ndd\nee\nf", collect) == "dd\nee\n"); // "cc" ended a held-over piece
  CHECK(called == Lines{"cc"});
  CHECK(splitter.feed_block("ff", collect).empty()); // no newline: all held
  CHECK(splitter.partial() == "fff");
  CHECK(splitter.feed_block("\n", collect).empty());
  CHECK(called == Lines{"cc", "fff"});
}

TEST_CASE("line splitter: feed_block gives feed's lines for any cut of the stream", "[line_splitter]") {
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += std::string(static_cast<std::size_t>(i * 7 % 23), 'a' + i % 26) + "\n";
  text += std::string(100, 'z') + "\r 50%\r100%\nno newline";
  for (const std::size_t max_line : {std::size_t{5}, std::size_t{64}, std::size_t{1} << 20}) {
    for (const std::size_t cut : {1, 2, 7, 16, 100, 4096}) {
      std::vector<std::string> chunks;
      for (std::size_t at = 0; at < text.size(); at += cut) chunks.push_back(text.substr(at, cut));
      CHECK(split_in_blocks(chunks, max_line) == split(chunks, max_line));
    }
  }
}
