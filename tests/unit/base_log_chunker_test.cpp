#include "core/base/count_newlines.hpp"
#include "core/base/log_chunker.hpp"
#include "tests/unit/catch.hpp"

#include <string>
#include <vector>

namespace {

struct Chunks {
  std::vector<std::string> bytes;
  std::size_t newlines = 0;
  std::string joined() const {
    std::string all;
    for (const auto& b : bytes) all += b;
    return all;
  }
};

/// Feeds `pieces` one by one, then finishes; returns what was passed on.
Chunks chunk(const std::vector<std::string>& pieces, std::size_t max_piece = 1 << 20) {
  air::LogChunker chunker(max_piece);
  Chunks out;
  const auto collect = [&](std::string_view held, std::string_view b) {
    out.bytes.emplace_back(std::string(held) + std::string(b));
    out.newlines += air::count_newlines(held) + air::count_newlines(b);
  };
  for (const auto& p : pieces) chunker.feed(p, collect);
  chunker.finish(collect);
  return out;
}

} // namespace

TEST_CASE("log chunker: passes the bytes on unchanged, cut after newlines", "[log_chunker]") {
  const auto c = chunk({"a\nb", "b\n", "\nc"});
  CHECK(c.joined() == "a\nbb\n\nc");
  CHECK(c.bytes == std::vector<std::string>{"a\n", "bb\n", "\n", "c"});
  CHECK(c.newlines == 3);
}

TEST_CASE("log chunker: an over-long line goes out in pieces with nothing added", "[log_chunker]") {
  const auto c = chunk({"0123", "456789", "\nok\n"}, 4);
  CHECK(c.joined() == "0123456789\nok\n");
  CHECK(c.bytes == std::vector<std::string>{"0123", "456789", "\nok\n"});
  const std::string big(std::size_t{5} << 19, 'a');
  CHECK(chunk({big, "\nafter\n"}).joined() == big + "\nafter\n");
}

TEST_CASE("log chunker: a last line without a newline stays without one", "[log_chunker]") {
  CHECK(chunk({"done\nno newline at end"}).joined() == "done\nno newline at end");
  CHECK(chunk({}).bytes.empty());
  CHECK(chunk({""}).bytes.empty());
}

TEST_CASE("count_newlines counts every newline, wherever it is", "[log_chunker]") {
  CHECK(air::count_newlines("") == 0);
  CHECK(air::count_newlines("no newline") == 0);
  CHECK(air::count_newlines("\n") == 1);
  CHECK(air::count_newlines("a\nb\n\nc") == 3);
  // Built in place: g++ 14 -O2 reads `many += a_string` of a temporary's
  // concatenation as an out-of-bounds copy (-Warray-bounds, a false positive).
  std::string many;
  for (int i = 0; i < 1000; ++i) {
    many.append(100, 'x');
    many.push_back('\n');
  }
  CHECK(air::count_newlines(many) == 1000);
  CHECK(air::count_newlines(std::string_view(many).substr(1, many.size() - 2)) == 999);
}

TEST_CASE("start_of_last_lines finds a read's last whole lines from its end", "[log_chunker]") {
  const auto from = [](std::string_view text, std::size_t n) {
    return std::string(air::start_of_last_lines(text, n));
  };
  CHECK(from("a\nb\nc\n", 2) == "b\nc\n");
  CHECK(from("a\nb\nc\n", 3) == "a\nb\nc\n");
  CHECK(from("a\nb\nc\n", 9) == "a\nb\nc\n");
  CHECK(from("a\nb\nc\n", 0) == "");
  // An unfinished last line is not one of them: it is not delivered yet.
  CHECK(from("a\nb\nc", 2) == "a\nb\nc");
  CHECK(from("a\nb\nc", 1) == "b\nc");
  CHECK(from("\n\n\n", 1) == "\n");
  CHECK(from("no newline", 5) == "no newline");
  CHECK(from("", 5) == "");
  // An empty view without storage (a read of nothing): its null data() is
  // given back, never handed to memrchr (UBSan stops the run there).
  CHECK(air::start_of_last_lines(std::string_view(), 5) == nullptr);
}
