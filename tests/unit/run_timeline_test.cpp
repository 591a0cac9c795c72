#include "core/run/timeline.hpp"
#include "tests/unit/catch.hpp"

using air::BoundedSeries;

TEST_CASE("a bounded series keeps every reading until its budget is reached", "[timeline]") {
  BoundedSeries s(BoundedSeries::Merge::last, 8);
  for (int i = 0; i < 7; ++i) s.add(i, i * 10);
  const auto p = s.points();
  REQUIRE(p.size() == 7);
  CHECK(p.front().t == 0);
  CHECK(p.back().value == 60);
  CHECK(s.width() == 1);
}

TEST_CASE("a full series merges pairs and doubles its width, never holding more than its budget",
          "[timeline]") {
  BoundedSeries s(BoundedSeries::Merge::last, 256);
  // A week of one reading a second.
  for (int i = 0; i < 7 * 24 * 3600; ++i) s.add(i, i);
  const auto p = s.points();
  CHECK(p.size() <= 257);
  CHECK(p.size() >= 128);
  CHECK(s.width() >= 2048);
  // Evenly spread over the whole week, the newest reading kept.
  CHECK(p.front().t < 7 * 24 * 3600 / 100);
  CHECK(p.back().t == 7 * 24 * 3600 - 1);
  CHECK(p.back().value == 7 * 24 * 3600 - 1);
  for (std::size_t i = 1; i < p.size(); ++i) CHECK(p[i].t > p[i - 1].t);
}

TEST_CASE("a counter keeps the later of a merged pair, a gauge their mean", "[timeline]") {
  BoundedSeries counter(BoundedSeries::Merge::last, 4);
  BoundedSeries gauge(BoundedSeries::Merge::mean, 4);
  for (int i = 0; i < 4; ++i) {
    counter.add(i, i + 1);
    gauge.add(i, i % 2 == 0 ? 0 : 100);
  }
  // Four readings filled the budget: two points of width 2.
  REQUIRE(counter.points().size() == 2);
  CHECK(counter.points()[0].value == 2);
  CHECK(counter.points()[1].value == 4);
  REQUIRE(gauge.points().size() == 2);
  CHECK(gauge.points()[0].value == 50);
  CHECK(gauge.points()[0].t == 1); // the later reading's time
  // A partial point (one reading of the two it will hold) is shown last.
  gauge.add(4, 20);
  REQUIRE(gauge.points().size() == 3);
  CHECK(gauge.points()[2].value == 20);
  gauge.add(5, 40);
  CHECK(gauge.points()[2].value == 30);
}

TEST_CASE("a reading back in time is dropped", "[timeline]") {
  BoundedSeries s;
  s.add(10, 1);
  s.add(5, 2);
  REQUIRE(s.points().size() == 1);
  CHECK(s.points()[0].value == 1);
}

TEST_CASE("an earlier attempt's series comes first and the budget still holds", "[timeline]") {
  BoundedSeries earlier(BoundedSeries::Merge::last, 8);
  BoundedSeries later(BoundedSeries::Merge::last, 8);
  for (int i = 0; i < 6; ++i) earlier.add(i, i);
  for (int i = 10; i < 16; ++i) later.add(i, i - 10);
  later.prepend(earlier);
  const auto p = later.points();
  CHECK(p.size() < 8);
  CHECK(p.front().t < 6);
  CHECK(p.back().t == 15);
}

TEST_CASE("many ranks share the points budget, each keeping a floor", "[timeline]") {
  CHECK(air::series_budget_for(2) == 256);
  CHECK(air::series_budget_for(8) == 256);
  CHECK(air::series_budget_for(1024) == 64);
  CHECK(air::series_budget_for(4096) == 32);
}

TEST_CASE("quiet stretches keep the longest, in time order", "[timeline]") {
  std::vector<air::QuietStretch> s{{0, 1}, {10, 30}, {40, 41}, {50, 60}};
  const auto kept = air::longest_stretches(s, 2);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].from == 10);
  CHECK(kept[1].from == 50);
}

TEST_CASE("a restarted run's timeline holds every attempt's spans per rank", "[timeline]") {
  air::RunTimeline first, second;
  first.ranks.push_back({});
  first.ranks[0].rank = 0;
  first.ranks[0].spans.push_back({0, 1, 2, 3});
  first.ranks[0].steps.add(2, 5);
  second.ranks.push_back({});
  second.ranks[0].rank = 0;
  second.ranks[0].spans.push_back({1, 4, 5, 6});
  second.ranks[0].steps.add(5, 1);
  second.prepend(first);
  REQUIRE(second.ranks.size() == 1);
  REQUIRE(second.ranks[0].spans.size() == 2);
  CHECK(second.ranks[0].spans[0].attempt == 0);
  CHECK(second.ranks[0].spans[1].attempt == 1);
  CHECK(second.ranks[0].steps.points().size() == 2);
}
