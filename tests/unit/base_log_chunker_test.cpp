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
  const auto collect = [&](std::string_view b, std::size_t n) {
    out.bytes.emplace_back(b);
    out.newlines += n;
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
