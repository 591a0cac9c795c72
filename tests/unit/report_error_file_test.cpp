// torchelastic error files: the shapes torch writes, and malformed ones.
#include "core/os/atomic_file.hpp"
#include "core/report/collect.hpp"
#include "core/report/rank_result.hpp"
#include "core/run/error_file.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

using air::RankResult;
using air::test::TempDir;

TEST_CASE("error file: torch @record shape", "[results]") {
  const air::ErrorFileRecord r = air::parse_error_file(air::test::k_record_error_file);
  CHECK_FALSE(r.malformed);
  CHECK(r.type == "RuntimeError");
  CHECK(r.message == "boom");
  CHECK(r.traceback ==
        "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nRuntimeError: boom\n");
  REQUIRE(r.timestamp.has_value());
  CHECK(*r.timestamp == 1712484803);
  CHECK_FALSE(r.error_code.has_value());
  CHECK(r.raw.empty());
}

TEST_CASE("error file: errorCode added by a parent torchrun", "[results]") {
  const air::ErrorFileRecord r = air::parse_error_file(
      R"({"message": {"message": "ValueError: bad", "extraInfo": {"py_callstack": "tb", "timestamp": 17}, "errorCode": -11}})");
  CHECK(r.type == "ValueError");
  CHECK(r.message == "bad");
  CHECK(r.traceback == "tb");
  CHECK(r.timestamp == 17);
  CHECK(r.error_code == -11);
}

TEST_CASE("error file: string message (new format)", "[results]") {
  SECTION("timestamp as a string at the top level") {
    const air::ErrorFileRecord r = air::parse_error_file(
        R"({"message": "torch.OutOfMemoryError: CUDA out of memory", "timestamp": "99"})");
    CHECK_FALSE(r.malformed);
    CHECK(r.type == "torch.OutOfMemoryError");
    CHECK(r.message == "CUDA out of memory");
    CHECK(r.traceback.empty());
    CHECK(r.timestamp == 99);
  }
  SECTION("no timestamp, message without a type") {
    const air::ErrorFileRecord r = air::parse_error_file(R"({"message": "something went wrong"})");
    CHECK_FALSE(r.malformed);
    CHECK(r.type.empty());
    CHECK(r.message == "something went wrong");
    CHECK_FALSE(r.timestamp.has_value());
  }
}

TEST_CASE("error file: a file name that is not UTF-8 keeps the exception", "[results]") {
  // Python's json.dump (torch's @record too) writes a latin-1 byte of a file
  // name as a lone surrogate escape, which the JSON reader refused.
  const air::ErrorFileRecord r = air::parse_error_file(
      R"({"message": {"message": "FileNotFoundError: [Errno 2] No such file or directory: 'caf\udce9.csv'", )"
      R"("extraInfo": {"py_callstack": "tb \ud83d\ude00 \\udce9 \ud800", "timestamp": "1"}}})");
  CHECK_FALSE(r.malformed);
  CHECK(r.type == "FileNotFoundError");
  CHECK(r.message == "[Errno 2] No such file or directory: 'caf\uFFFD.csv'");
  // A pair stays one character; an escaped backslash is no escape; a lone high half goes too.
  CHECK(r.traceback == "tb \U0001F600 \\udce9 \uFFFD");
}

TEST_CASE("error file: malformed texts are kept raw", "[results]") {
  SECTION("not JSON") {
    const air::ErrorFileRecord r = air::parse_error_file("Traceback: oops");
    CHECK(r.malformed);
    CHECK(r.message ==
          "not JSON: parse error at line 1, column 1: syntax error while parsing value - invalid "
          "literal; last read: 'T'");
    CHECK(r.raw == "Traceback: oops");
  }
  SECTION("no message") {
    const air::ErrorFileRecord r = air::parse_error_file(R"({"error": "x"})");
    CHECK(r.malformed);
    CHECK(r.message == "no \"message\" string or object");
    CHECK(r.raw == R"({"error": "x"})");
  }
  SECTION("message of the wrong type") {
    CHECK(air::parse_error_file(R"({"message": 3})").malformed);
    CHECK(air::parse_error_file(R"([1])").malformed);
  }
  SECTION("raw text is capped") {
    const air::ErrorFileRecord r = air::parse_error_file(std::string(100000, 'x'));
    CHECK(r.malformed);
    CHECK(r.raw.size() == air::k_error_raw_bytes);
  }
  SECTION("odd timestamps are ignored, not fatal") {
    const air::ErrorFileRecord r =
        air::parse_error_file(R"({"message": {"message": "E: x", "extraInfo": {"timestamp": "soon"}}})");
    CHECK_FALSE(r.malformed);
    CHECK_FALSE(r.timestamp.has_value());
    CHECK(air::parse_error_file(R"({"message": "x", "timestamp": 1e300})").timestamp == std::nullopt);
  }
}

TEST_CASE("error file: exception type splitting", "[results]") {
  using P = std::pair<std::string, std::string>;
  CHECK(air::split_exception_message("RuntimeError: boom") == P{"RuntimeError", "boom"});
  CHECK(air::split_exception_message("KeyboardInterrupt: ") == P{"KeyboardInterrupt", ""});
  CHECK(air::split_exception_message("a.b.C_1: x: y") == P{"a.b.C_1", "x: y"});
  CHECK(air::split_exception_message("see http://x") == P{"", "see http://x"});
  CHECK(air::split_exception_message("http://x") == P{"", "http://x"});
  CHECK(air::split_exception_message("1Error: x") == P{"", "1Error: x"});
  CHECK(air::split_exception_message(".a: x") == P{"", ".a: x"});
  CHECK(air::split_exception_message("no colon") == P{"", "no colon"});
}

TEST_CASE("error file reading", "[results]") {
  TempDir dir;
  CHECK_FALSE(air::read_error_file("").has_value());
  CHECK_FALSE(air::read_error_file(dir.file("none.json")).has_value());
  const auto r = air::read_error_file(dir.write("error.json", air::test::k_record_error_file));
  REQUIRE(r.has_value());
  CHECK(r->type == "RuntimeError");
  std::filesystem::create_directory(dir.file("d"));
  const auto d = air::read_error_file(dir.file("d"));
  REQUIRE(d.has_value());
  CHECK(d->malformed);
  CHECK(d->message == "cannot read " + dir.file("d") + ": not a regular file");
}

TEST_CASE("error file: the headline names the exception and the program's frame", "[results]") {
  air::ErrorFileRecord r;
  r.type = "RuntimeError";
  r.message = "injected failure at step 8\nsecond line";
  r.traceback = "Traceback (most recent call last):\n"
                "  File \"/w/train.py\", line 27, in on_step_end\n"
                "  File \"/v/site-packages/torch/a.py\", line 3, in f\n"
                "RuntimeError: injected failure at step 8\n";
  CHECK(air::exception_headline(r) == "RuntimeError: injected failure at step 8 (train.py:27)");
  r.traceback.clear();
  r.message.clear();
  CHECK(air::exception_headline(r) == "RuntimeError");
  r.type.clear(); // no type: nothing to name
  CHECK(air::exception_headline(r) == "");
  const auto bad = air::malformed_error_file("not JSON", "x");
  CHECK(air::exception_headline(bad) == "");
}
