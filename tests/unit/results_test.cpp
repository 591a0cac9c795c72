// Rank results, torchelastic error files, atomic writes and collect_report.
#include "core/os/atomic_file.hpp"
#include "core/report/collect.hpp"
#include "core/report/error_file.hpp"
#include "core/report/rank_result.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

using air::RankResult;
using air::test::TempDir;

TEST_CASE("result file states", "[results]") {
  TempDir dir;
  REQUIRE(!dir.path().empty());

  SECTION("missing file") {
    const RankResult r = air::read_rank_result(dir.file("nope.json"));
    CHECK(r.state == RankResult::State::missing);
    CHECK(air::to_string(r.state) == "missing");
    CHECK(r.error.empty());
  }
  SECTION("no result file planned") { CHECK(air::read_rank_result("").state == RankResult::State::missing); }
  SECTION("ok keeps the value and its key order") {
    const RankResult r = air::read_rank_result(dir.write("r.json", R"({"z": 1, "a": [true, null, "x"]})"));
    REQUIRE(r.state == RankResult::State::ok);
    CHECK(air::to_string(r.state) == "ok");
    CHECK(r.value.dump() == R"({"z":1,"a":[true,null,"x"]})");
    CHECK(r.size_bytes == 32);
  }
  SECTION("a scalar is a result") {
    const RankResult r = air::read_rank_result(dir.write("r.json", "3.5\n"));
    REQUIRE(r.state == RankResult::State::ok);
    CHECK(r.value.get<double>() == 3.5);
  }
  SECTION("invalid JSON keeps the parse error and the first 200 bytes") {
    const std::string text = R"({"a": })" + std::string(300, 'x');
    const RankResult r = air::read_rank_result(dir.write("r.json", text));
    REQUIRE(r.state == RankResult::State::invalid);
    CHECK(air::to_string(r.state) == "invalid");
    CHECK(r.error == "parse error at line 1, column 7: syntax error while parsing value - unexpected '}'; "
                     "expected '[', '{', or a literal");
    CHECK(r.excerpt == text.substr(0, 200));
    CHECK(r.value.is_null());
  }
  SECTION("two values are invalid") {
    const RankResult r = air::read_rank_result(dir.write("r.json", "1 2"));
    CHECK(r.state == RankResult::State::invalid);
    CHECK(r.excerpt == "1 2");
  }
  SECTION("an empty file is invalid") {
    const RankResult r = air::read_rank_result(dir.write("r.json", ""));
    CHECK(r.state == RankResult::State::invalid);
    CHECK(r.error == "the file is empty (expected one JSON value)");
  }
  SECTION("too large is reported without reading") {
    const std::string path = dir.write("r.json", "[" + std::string(100, ' ') + "]");
    const RankResult r = air::read_rank_result(path, 50);
    REQUIRE(r.state == RankResult::State::too_large);
    CHECK(air::to_string(r.state) == "too_large");
    CHECK(r.error == "result file is 102 bytes, over the limit of 50 bytes");
    CHECK(r.size_bytes == 102);
    CHECK(air::read_rank_result(path, 102).state == RankResult::State::ok);
  }
  SECTION("the default limit is 16 MiB") {
    CHECK(air::k_max_result_bytes == 16u * 1024 * 1024);
    const std::string path = dir.file("big.json");
    REQUIRE(::truncate(dir.write("big.json", "").c_str(), 16 * 1024 * 1024 + 1) == 0);
    const RankResult r = air::read_rank_result(path);
    CHECK(r.state == RankResult::State::too_large);
    CHECK(r.size_bytes == 16u * 1024 * 1024 + 1);
  }
  SECTION("a directory is invalid, not fatal") {
    std::filesystem::create_directory(dir.file("d"));
    const RankResult r = air::read_rank_result(dir.file("d"));
    CHECK(r.state == RankResult::State::invalid);
    CHECK(r.error == "cannot read " + dir.file("d") + ": not a regular file");
  }
  SECTION("a FIFO does not block") {
    REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);
    const RankResult r = air::read_rank_result(dir.file("fifo"));
    CHECK(r.state == RankResult::State::invalid);
    CHECK(r.error == "cannot read " + dir.file("fifo") + ": not a regular file");
  }
}

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

TEST_CASE("atomic write", "[results]") {
  TempDir dir;
  const std::string path = dir.file("summary.json");
  SECTION("creates the file with exact content and no temp file left") {
    std::string content = "{\"a\": 1}\n";
    content += std::string("\0binary\xff", 8);
    REQUIRE(air::write_file_atomically(path, content).ok());
    CHECK(air::test::read_all(path) == content);
    int entries = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
      CHECK(e.path().filename() == "summary.json");
      ++entries;
    }
    CHECK(entries == 1);
  }
  SECTION("replaces an existing file") {
    dir.write("summary.json", std::string(10000, 'o'));
    REQUIRE(air::write_file_atomically(path, "new").ok());
    CHECK(air::test::read_all(path) == "new");
  }
  SECTION("large content") {
    const std::string big(5 * 1024 * 1024 + 7, 'z');
    REQUIRE(air::write_file_atomically(path, big).ok());
    CHECK(air::test::read_all(path) == big);
  }
  SECTION("mode follows the umask") {
    const mode_t old = ::umask(022);
    REQUIRE(air::write_file_atomically(path, "x").ok());
    ::umask(old);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0644);
  }
  SECTION("a missing directory is an error naming the path and call") {
    const std::string bad = dir.file("no/such/summary.json");
    const air::Status s = air::write_file_atomically(bad, "x");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().kind == air::ErrorKind::system);
    CHECK(s.error().message == "cannot write " + bad + ": open: No such file or directory");
  }
  SECTION("a failed rename leaves no temp file and keeps the old one") {
    std::filesystem::create_directory(dir.file("target"));
    dir.write("target/keep", "k");
    const air::Status s = air::write_file_atomically(dir.file("target"), "x");
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message == "cannot write " + dir.file("target") + ": rename: Is a directory");
    int entries = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
    CHECK(entries == 1);
    CHECK(air::test::read_all(dir.file("target/keep")) == "k");
  }
  SECTION("an empty path is refused") {
    CHECK(air::write_file_atomically("", "x").error().message == "cannot write a file with an empty path");
  }
}

TEST_CASE("collect_report reads every rank's files", "[results]") {
  TempDir dir;
  air::test::SampleRun run;
  for (auto& rp : run.plan.ranks) {
    rp.result_file = dir.file("result-" + std::to_string(rp.rank) + ".json");
    rp.error_file = dir.file("error-" + std::to_string(rp.rank) + ".json");
  }
  dir.write("result-0.json", R"({"loss": 0.5})"); // a stopped rank keeps its result
  dir.write("result-2.json", "{oops");
  dir.write("error-1.json", air::test::k_record_error_file);
  const air::RunReport report =
      air::collect_report(run.spec, run.hardware, run.selection, run.plan, run.outcome, 3, "node-3");
  CHECK(report.host == "node-3");
  CHECK(report.exit_code == 3);
  REQUIRE(report.results.size() == 4);
  REQUIRE(report.errors.size() == 4);
  CHECK(report.results[0].state == RankResult::State::ok);
  CHECK(report.results[0].value.dump() == R"({"loss":0.5})");
  CHECK(report.results[1].state == RankResult::State::missing);
  CHECK(report.results[2].state == RankResult::State::invalid);
  CHECK(report.results[3].state == RankResult::State::missing);

  CHECK_FALSE(report.errors[0].has_value()); // stopped, no error file
  REQUIRE(report.errors[1].has_value());
  CHECK(report.errors[1]->source == air::RankError::Source::error_file);
  CHECK(report.errors[1]->type == "RuntimeError");
  CHECK(report.errors[1]->message == "boom");
  CHECK(report.errors[1]->timestamp == 1712484803);
  REQUIRE(report.errors[2].has_value()); // failed without an error file: output tail
  CHECK(report.errors[2]->source == air::RankError::Source::output_tail);
  CHECK(report.errors[2]->type.empty());
  CHECK(report.errors[2]->message == "signal 11 (SIGSEGV, core dumped)");
  CHECK(report.errors[2]->traceback == "step 7\nFatal Python error: Segmentation fault");
  CHECK_FALSE(report.errors[3].has_value());
}

TEST_CASE("rank_error choices", "[results]") {
  using air::ExitStatus;
  air::RankOutcome ok = air::test::make_rank(0, 10, ExitStatus::exited_with(0), 1);
  CHECK_FALSE(air::rank_error(ok, std::nullopt).has_value());
  CHECK_FALSE(air::rank_failed(ok));

  air::RankOutcome spawn = air::test::make_rank(1, -1, ExitStatus::exited_with(127), 0);
  spawn.spawn_error = "execve train: No such file or directory";
  CHECK(air::rank_failed(spawn));
  const auto e = air::rank_error(spawn, std::nullopt);
  REQUIRE(e.has_value());
  CHECK(e->source == air::RankError::Source::spawn);
  CHECK(e->message == "execve train: No such file or directory");
  CHECK(air::describe_rank_end(spawn) == "could not be started: execve train: No such file or directory");

  air::RankOutcome oom = air::test::make_rank(2, 12, ExitStatus::killed_by(9), 1);
  oom.oom_killed = true;
  oom.tail = {"a", "b"};
  const auto o = air::rank_error(oom, std::nullopt);
  REQUIRE(o.has_value());
  CHECK(o->message == "signal 9 (SIGKILL), killed by the OOM killer");
  CHECK(o->traceback == "a\nb");

  air::RankOutcome never = air::test::make_rank(3, -1, ExitStatus{}, 0);
  CHECK_FALSE(air::rank_failed(never));

  air::ErrorFileRecord bad = air::parse_error_file("garbage");
  const auto m = air::rank_error(oom, bad);
  REQUIRE(m.has_value());
  CHECK(m->source == air::RankError::Source::error_file);
  CHECK(m->message.rfind("unusable TORCHELASTIC_ERROR_FILE: not JSON: ", 0) == 0);
  CHECK(m->traceback == "garbage");
}

TEST_CASE("time formatting", "[results]") {
  using namespace std::chrono;
  CHECK(air::format_utc(system_clock::time_point(milliseconds(1775556804123LL))) ==
        "2026-04-07T10:13:24.123Z");
  CHECK(air::format_utc(system_clock::time_point(milliseconds(0))) == "1970-01-01T00:00:00.000Z");
}

TEST_CASE("the documented result-file protocol produces an ok result", "[results]") {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) {
    WARN("python3 not found; documented protocol check skipped");
    return;
  }
  // Runs the Python example from docs/summary-schema.md as written there.
  const std::string doc = air::test::read_all(std::string(AIR_TEST_DATA_DIR) + "/../docs/summary-schema.md");
  const auto start = doc.find("```python\n");
  REQUIRE(start != std::string::npos);
  const auto end = doc.find("```", start + 10);
  REQUIRE(end != std::string::npos);
  TempDir dir;
  const std::string script =
      dir.write("writer.py", doc.substr(start + 10, end - start - 10) + "write_result({\"loss\": 0.25})\n");
  const std::string result = dir.file("rank0.result.json");
  const std::string cmd = "AIR_RESULT_FILE='" + result + "' python3 '" + script + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const RankResult r = air::read_rank_result(result);
  REQUIRE(r.state == RankResult::State::ok);
  CHECK(r.value.dump() == R"({"loss":0.25})");
  int entries = 0; // the temporary file was renamed, not left behind
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  CHECK(entries == 2);
}
