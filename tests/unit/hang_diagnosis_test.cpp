#include "core/hang/diagnosis.hpp"
#include "core/hang/flight_recorder.hpp"
#include "core/run/progress.hpp"
#include "core/run/stacks.hpp"
#include "tests/unit/catch.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <string>

using air::HangRank;

namespace {

// As faulthandler writes it: the newest thread first, the main thread last.
constexpr const char* k_stuck_dump = R"(Thread 0x00007f9a6f2356c0 (most recent call first):
  File "/tmp/run/pyshim/sitecustomize.py", line 140 in loop
  File "/usr/lib/python3.11/threading.py", line 975 in run

Current thread 0x00007f9a6f677040 (most recent call first):
  File "/usr/lib/python3.11/selectors.py", line 415 in select
  File "/home/u/proj/train.py", line 12 in stuck_here
  File "/home/u/proj/train.py", line 30 in <module>
)";

constexpr const char* k_waiting_dump = R"(Current thread 0x00007f00 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 1320 in all_reduce
  File "/tmp/run/pyshim/sitecustomize.py", line 99 in collective
  File "/home/u/proj/train.py", line 20 in train_step
  File "/home/u/proj/train.py", line 31 in <module>
)";

HangRank waiting(int rank, std::uint64_t seq, std::string place = "train_step at train.py:20") {
  HangRank r;
  r.rank = rank;
  r.counted = true;
  r.in_collective = true;
  r.collective = "all_reduce";
  r.collective_seq = seq;
  r.since = "12:01:03";
  r.place = std::move(place);
  return r;
}

HangRank outside(int rank, std::string place = "stuck_here at train.py:12") {
  HangRank r;
  r.rank = rank;
  r.counted = true;
  r.collective_seq = 3;
  r.place = std::move(place);
  return r;
}

} // namespace

TEST_CASE("a rank's place is its innermost frame of user code in the main thread", "[diagnosis]") {
  CHECK(air::user_place(k_stuck_dump) == "stuck_here at train.py:12");
  CHECK(air::user_place(k_waiting_dump) == "train_step at train.py:20");
  // Only library frames: the innermost one stands in.
  CHECK(air::user_place("Current thread 0x1 (most recent call first):\n"
                        "  File \"/usr/lib/python3.11/time.py\", line 3 in sleep\n") == "sleep at time.py:3");
  CHECK(air::user_place("").empty());
  CHECK(air::user_place("garbage\nno frames here\n").empty());
  // The warm start's program is air-run's, as the shim is.
  CHECK(air::user_place("Current thread 0x1 (most recent call first):\n"
                        "  File \"/tmp/air-run-1/air_run_warm.py\", line 419 in run_target\n"
                        "  File \"/w/train.py\", line 7 in step\n") == "step at train.py:7");
}

TEST_CASE("the rank outside the collective the others wait in is the laggard", "[diagnosis]") {
  const auto d = air::diagnose_hang({waiting(0, 4), outside(1), waiting(2, 4)});
  CHECK(d.laggards == std::vector<int>{1});
  CHECK(d.line ==
        "rank 1 is in stuck_here at train.py:12; ranks 0 and 2 wait in all_reduce #4 at train_step at "
        "train.py:20 since 12:01:03");
}

TEST_CASE("ranks behind in the collective sequence are the laggards", "[diagnosis]") {
  const auto d = air::diagnose_hang({waiting(0, 7), waiting(1, 6, "eval at train.py:40"), waiting(2, 7)});
  CHECK(d.laggards == std::vector<int>{1});
  CHECK(d.line.rfind("rank 1 waits in all_reduce #6 at eval at train.py:40", 0) == 0);
}

TEST_CASE("no laggard when every rank is in the same collective, or none is", "[diagnosis]") {
  auto same = air::diagnose_hang({waiting(0, 5), waiting(1, 5)});
  CHECK(same.laggards.empty());
  CHECK(same.line.find("rank 0 waits in all_reduce #5") != std::string::npos);
  auto none = air::diagnose_hang({outside(0), outside(1, "")});
  CHECK(none.laggards.empty());
  CHECK(none.line ==
        "rank 0 is in stuck_here at train.py:12; rank 1 is in an unknown place (no Python stack)");
}

TEST_CASE("ranks waiting in different collectives are named as mismatched", "[diagnosis]") {
  // air.data.save on rank 0 alone: it waits in broadcast_object_list, the
  // others in the barrier that follows; the same count of collectives each.
  HangRank saving = waiting(0, 4, "save_model at train.py:9");
  saving.collective = "broadcast_object_list";
  HangRank one = waiting(1, 4, "<module> at train.py:12");
  one.collective = "barrier";
  HangRank two = one;
  two.rank = 2;
  two.since = "12:01:02";
  const auto d = air::diagnose_hang({two, saving, one});
  CHECK(d.laggards.empty());
  CHECK(d.line == "ranks wait in different collectives: rank 0 in broadcast_object_list #4 at save_model at "
                  "train.py:9 since 12:01:03; ranks 1 and 2 in barrier #4 at <module> at train.py:12 since "
                  "12:01:02");
  // Behind in the sequence, but in another collective: still a mismatch, not a laggard.
  HangRank gather = waiting(1, 6, "eval at train.py:40");
  gather.collective = "all_gather";
  const auto m = air::diagnose_hang({waiting(0, 7), gather});
  CHECK(m.laggards.empty());
  CHECK(m.line.rfind("ranks wait in different collectives: rank 0 in all_reduce #7", 0) == 0);
  // A rank outside any collective is still the laggard, whatever the others wait in.
  const auto out = air::diagnose_hang({saving, outside(1), one});
  CHECK(out.laggards == std::vector<int>{1});
}

TEST_CASE("a rank inside the air package is placed at the user's line that called it", "[diagnosis]") {
  constexpr const char* dump = R"(Current thread 0x00007f00 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 2010 in broadcast_object_list
  File "/tmp/run/pyshim/sitecustomize.py", line 141 in collective
  File "/opt/air/python/air/data/_checkpoint.py", line 258 in _next_default_path
  File "/opt/air/python/air/data/_checkpoint.py", line 269 in save
  File "/home/u/proj/train.py", line 9 in save_model
  File "/home/u/proj/train.py", line 14 in <module>
)";
  CHECK(air::user_place(dump) == "save_model at train.py:9");
}

TEST_CASE("ranks that already exited take no part in the diagnosis", "[diagnosis]") {
  HangRank gone = outside(1);
  gone.running = false;
  const auto d = air::diagnose_hang({waiting(0, 4), gone, waiting(2, 4)});
  CHECK(d.laggards.empty());
}

TEST_CASE("a rank slower outside collectives than the others is the only straggler", "[diagnosis]") {
  using air::StepStats;
  const std::uint64_t ms = 1'000'000;
  SECTION("80 ms more a step over 40 steps") {
    const auto s =
        air::find_stragglers({{0, 40, 40 * 21 * ms}, {1, 40, 40 * 101 * ms}, {2, 40, 40 * 21 * ms}});
    REQUIRE(s.size() == 1);
    CHECK(s[0].rank == 1);
    CHECK(s[0].slower_ms == Approx(80.0));
    CHECK(air::straggler_line(s[0]) ==
          "rank 1 is a straggler: 101 ms a step outside collectives, the others 21 ms");
  }
  SECTION("noise of a few ms is no straggler") {
    CHECK(
        air::find_stragglers({{0, 40, 40 * 20 * ms}, {1, 40, 40 * 26 * ms}, {2, 40, 40 * 21 * ms}}).empty());
  }
  SECTION("a large relative gap on tiny steps is not enough: 10 ms at least") {
    CHECK(air::find_stragglers({{0, 40, 40 * 1 * ms}, {1, 40, 40 * 5 * ms}}).empty());
  }
  SECTION("10 ms on 1 s steps is noise: 20% at least") {
    CHECK(air::find_stragglers({{0, 40, 40 * 1000 * ms}, {1, 40, 40 * 1015 * ms}}).empty());
  }
  SECTION("too few steps to judge") {
    CHECK(air::find_stragglers({{0, 5, 5 * 1 * ms}, {1, 5, 5 * 100 * ms}}).empty());
  }
  SECTION("two ranks: the slower one") {
    const auto s = air::find_stragglers({{0, 40, 40 * 20 * ms}, {1, 40, 40 * 100 * ms}});
    REQUIRE(s.size() == 1);
    CHECK(s[0].rank == 1);
  }
}

TEST_CASE("rank lists read as a sentence", "[diagnosis]") {
  CHECK(air::rank_words({3}) == "3");
  CHECK(air::rank_words({0, 2}) == "0 and 2");
  CHECK(air::rank_words({0, 2, 3}) == "0, 2 and 3");
}

TEST_CASE("the shim's progress slots are the ones air-run reads", "[diagnosis]") {
  // The page is read by C++ and written by the shim's Python: one number off
  // and steps land in the wrong slot. Every slot the shim names must match.
  const std::string shim(air::stack_shim_source());
  namespace S = air::progress_slot;
  const std::pair<const char*, int> slots[] = {
      {"_AIR_SLOT_STEPS", S::steps},
      {"_AIR_SLOT_COLL_SEQ", S::coll_seq},
      {"_AIR_SLOT_COLL_ENTERED", S::coll_entered_ns},
      {"_AIR_SLOT_STOP_STEP", S::stop_step},
      {"_AIR_SLOT_STOP_REQUESTED", S::stop_requested},
      {"_AIR_SLOT_STOP_DEADLINE", S::stop_deadline_ns},
      {"_AIR_SLOT_POLLS_STOP", S::polls_stop},
      {"_AIR_SLOT_FR_REQUEST", S::fr_request},
      {"_AIR_SLOT_FR_DONE", S::fr_done},
      {"_AIR_SLOT_PID", S::pid},
      {"_AIR_SLOT_FR_ARMED", S::fr_armed},
  };
  for (const auto& [name, slot] : slots) {
    INFO(name);
    CHECK(shim.find(fmt::format("{} = {}\n", name, slot)) != std::string::npos);
  }
  // The step slots are written together, in this order, from steps on.
  CHECK(S::last_step_ns == S::steps + 1);
  CHECK(S::busy_ns == S::steps + 2);
  CHECK(S::busy_steps == S::steps + 3);
  CHECK(S::coll_entered_ns == S::coll_seq + 1);
  CHECK(S::coll_op == S::coll_seq + 2);
  // The collective names, in the shim's order.
  CHECK(air::collective_name(1) == "all_reduce");
  CHECK(air::collective_name(17) == "monitored_barrier");
  CHECK(air::collective_name(18) == "ddp_all_reduce");
  CHECK(air::collective_name(19) == "work_wait");
  CHECK(air::collective_name(20) == "a collective");
  CHECK(shim.find("\"recv\", \"monitored_barrier\", \"ddp_all_reduce\", \"work_wait\")") !=
        std::string::npos);
  CHECK(air::collective_name(0) == "a collective");
}

TEST_CASE("a Flight Recorder dump recorded on the GPU machine reads back", "[diagnosis]") {
  // tests/data/flight_recorder_rank0.json: one rank, NCCL 2.28, torch 2.11;
  // five all_reduce then a broadcast, all completed.
  std::ifstream in(std::string(AIR_TEST_DATA_DIR) + "/data/flight_recorder_rank0.json");
  REQUIRE(in);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto state = air::parse_flight_recorder(text);
  REQUIRE(state);
  CHECK(state->last_enqueued == 6);
  CHECK(state->last_completed == 6);
  CHECK(state->last_op == "nccl:broadcast");
  CHECK(state->last_state == "completed");
  CHECK_FALSE(air::parse_flight_recorder("{\"error\": \"no NCCL\"}"));
  CHECK_FALSE(air::parse_flight_recorder("not json"));
  CHECK_FALSE(air::parse_flight_recorder(R"({"entries": [{"pg_id": "zero"}]})"));
}

TEST_CASE("NCCL's sequence names the laggard when Python sees no collective", "[diagnosis]") {
  HangRank a = outside(0, "train_step at train.py:20"), b = outside(1, "load_batch at data.py:7"),
           c = outside(2, "train_step at train.py:20");
  a.nccl_enqueued = 12, b.nccl_enqueued = 11, c.nccl_enqueued = 12;
  a.nccl_op = b.nccl_op = c.nccl_op = "nccl:all_reduce";
  a.nccl_state = c.nccl_state = "started";
  b.nccl_state = "completed";
  const auto d = air::diagnose_hang({a, b, c});
  CHECK(d.laggards == std::vector<int>{1});
  CHECK(d.line == "rank 1 is in load_batch at data.py:7, its last NCCL collective #11 (nccl:all_reduce, "
                  "completed); ranks 0 and 2 enqueued NCCL collective #12 (nccl:all_reduce, started) at "
                  "train_step at train.py:20");
  c.nccl_enqueued = 11;
  CHECK(air::diagnose_hang({a, b, c}).laggards == std::vector<int>{1, 2});
  b.nccl_enqueued = c.nccl_enqueued = 12;
  CHECK(air::diagnose_hang({a, b, c}).laggards.empty());
}
