// JUnit XML: exact text, XML escaping, and validation by xmllint against
// tests/data/junit.xsd (skipped with a warning where xmllint is missing).
#include "core/os/atomic_file.hpp"
#include "core/report/junit.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/results_fixture.hpp"

#include <cstdio>
#include <cstdlib>

namespace {

bool have_xmllint() { return std::system("xmllint --version >/dev/null 2>&1") == 0; }

std::string xsd_path() { return std::string(AIR_TEST_DATA_DIR) + "/data/junit.xsd"; }

// Runs a command and returns its stdout.
std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

// The string value of an XPath expression, as xmllint parses the file. A
// sentinel marks the end, because xmllint versions differ in the newline
// they print after a result.
std::string xpath(const std::string& file, const std::string& expr) {
  const std::string out = run_capture("xmllint --xpath 'concat(" + expr + ", \"|\")' '" + file + "'");
  const auto bar = out.rfind('|');
  return bar == std::string::npos ? "<no result>" : out.substr(0, bar);
}

int validate(const air::test::TempDir& dir, const std::string& name, const std::string& xml) {
  const std::string path = dir.file(name);
  REQUIRE(air::write_file_atomically(path, xml).ok());
  const std::string cmd = "xmllint --noout --schema '" + xsd_path() + "' '" + path + "' 2>'" + path + ".log'";
  const int rc = std::system(cmd.c_str());
  INFO(cmd);
  INFO(air::test::read_all(path + ".log"));
  INFO(xml);
  return rc;
}

} // namespace

TEST_CASE("junit: failed run, exact text", "[junit]") {
  air::test::SampleRun run;
  const air::RunReport report = air::test::sample_report(run);
  CHECK(air::junit_xml(report) ==
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<testsuite name=\"job\" tests=\"4\" failures=\"2\" errors=\"0\" skipped=\"1\" time=\"12.410\" "
        "timestamp=\"2026-04-07T10:13:24\" hostname=\"node-3\">\n"
        "  <properties>\n"
        "    <property name=\"run_id\" value=\"r1\"/>\n"
        "    <property name=\"status\" value=\"failed\"/>\n"
        "    <property name=\"exit_code\" value=\"3\"/>\n"
        "    <property name=\"reason\" value=\"rank 1 exited with exit code 3\"/>\n"
        "    <property name=\"accelerator_type\" value=\"GPU_2xH100\"/>\n"
        "  </properties>\n"
        "  <testcase classname=\"air-run.job\" name=\"rank 0\" time=\"12.300\">\n"
        "    <skipped message=\"stopped by air-run: rank 1 exited with exit code 3\"/>\n"
        "    <system-out>epoch 1 loss 0.5\n</system-out>\n"
        "  </testcase>\n"
        "  <testcase classname=\"air-run.job\" name=\"rank 1\" time=\"1.250\">\n"
        "    <failure message=\"RuntimeError: boom (exit code 3)\" type=\"RuntimeError\">"
        "Traceback (most recent call last):\n  File \"train.py\", line 3, in &lt;module&gt;\nRuntimeError: "
        "boom\n"
        "</failure>\n"
        "    <system-out>Traceback (most recent call last):\nRuntimeError: boom\n</system-out>\n"
        "  </testcase>\n"
        "  <testcase classname=\"air-run.job\" name=\"rank 2\" time=\"1.500\">\n"
        "    <failure message=\"signal 11 (SIGSEGV, core dumped)\" type=\"SIGSEGV\">"
        "step 7\nFatal Python error: Segmentation fault</failure>\n"
        "    <system-out>step 7\nFatal Python error: Segmentation fault\n</system-out>\n"
        "  </testcase>\n"
        "  <testcase classname=\"air-run.job\" name=\"rank 3\" time=\"0.750\">\n"
        "  </testcase>\n"
        "</testsuite>\n");
}

TEST_CASE("junit: XML escaping", "[junit]") {
  CHECK(air::xml_escape("a<b>&\"c'", false) == "a&lt;b&gt;&amp;\"c'");
  CHECK(air::xml_escape("a<b>&\"c'", true) == "a&lt;b&gt;&amp;&quot;c&apos;");
  CHECK(air::xml_escape("x\ty\nz\r", false) == "x\ty\nz&#13;");
  CHECK(air::xml_escape("x\ty\nz\r", true) == "x&#9;y&#10;z&#13;");
  // Characters XML 1.0 forbids become U+FFFD; colour sequences disappear.
  CHECK(air::xml_escape(std::string("a\0b", 3), false) == "a\xEF\xBF\xBD"
                                                          "b");
  std::string five_replacements;
  for (int i = 0; i < 5; ++i) five_replacements += "\xEF\xBF\xBD";
  CHECK(air::xml_escape("\x01\x08\x0b\x0c\x1f", false) == five_replacements);
  CHECK(air::xml_escape("\x7f", false) == "\x7f"); // DEL is allowed in XML 1.0
  CHECK(air::xml_escape("\x1b[31mred\x1b[0m", false) == "red");
  CHECK(air::xml_escape("\x1b"
                        "c",
                        false) == "\xEF\xBF\xBD"
                                  "c");
  CHECK(air::xml_escape("\xEF\xBF\xBE", false) == "\xEF\xBF\xBD"); // U+FFFE
  // Invalid UTF-8: stray continuation, truncated, overlong, surrogate.
  CHECK(air::xml_escape("\x80", false) == "\xEF\xBF\xBD");
  CHECK(air::xml_escape("\xE2\x82", false) == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(air::xml_escape("\xC0\xAF", false) == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(air::xml_escape("\xED\xA0\x80", false) == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  // Valid multi-byte text passes through.
  CHECK(air::xml_escape("Grüße € 𝄞", true) == "Grüße € 𝄞");
}

TEST_CASE("junit: every kind of rank validates against the schema", "[junit]") {
  if (!have_xmllint()) {
    WARN("xmllint not found (Debian: libxml2-utils); JUnit schema check skipped");
    return;
  }
  air::test::TempDir dir;
  REQUIRE(std::system(("xmllint --noout '" + xsd_path() + "'").c_str()) == 0);

  SECTION("failed run") {
    air::test::SampleRun run;
    const air::RunReport report = air::test::sample_report(run);
    CHECK(validate(dir, "failed.xml", air::junit_xml(report)) == 0);
  }
  SECTION("hostile text survives a real parser") {
    air::test::SampleRun run;
    run.outcome.reason = "rank 1 said \"<&>\"\nline two";
    run.outcome.ranks[1].tail = {std::string("nul\0byte", 8), "\x1b[31mred\x1b[0m ]]> \xff\xfe",
                                 "tab\there\r"};
    run.spec.spec_path = "ci/j&<1>.yaml";
    air::RunReport report = air::test::sample_report(run);
    report.errors[1]->message = "multi\nline \"quoted\" <message>";
    const std::string xml = air::junit_xml(report);
    REQUIRE(validate(dir, "hostile.xml", xml) == 0);
    const std::string file = dir.file("hostile.xml");
    CHECK(xpath(file, "string(//testcase[@name=\"rank 1\"]/failure/@message)") ==
          "RuntimeError: multi\nline \"quoted\" <message> (exit code 3)");
    CHECK(xpath(file, "string(//testcase[@name=\"rank 1\"]/system-out)") ==
          "nul\xEF\xBF\xBD"
          "byte\nred ]]> \xEF\xBF\xBD\xEF\xBF\xBD\ntab\there\n");
    CHECK(xpath(file, "string(//testcase[@name=\"rank 1\"]/@classname)") == "air-run.j&<1>");
    CHECK(xpath(file, "string(//property[@name=\"reason\"]/@value)") == "rank 1 said \"<&>\"\nline two");
  }
  SECTION("timeout: stopped ranks are errors") {
    air::test::SampleRun run;
    run.outcome.status = air::RunOutcome::Status::timed_out;
    run.outcome.reason = "timeout of 1h30m reached";
    run.outcome.root_cause_rank = -1;
    for (auto& r : run.outcome.ranks) {
      r.stopped_by_air_run = true;
      r.status = air::ExitStatus::killed_by(15);
    }
    air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 124, {}, {}};
    const std::string xml = air::junit_xml(report);
    CHECK(xml.find("tests=\"4\" failures=\"0\" errors=\"4\" skipped=\"0\"") != std::string::npos);
    CHECK(xml.find("<error message=\"stopped by air-run: timeout of 1h30m reached\" type=\"timed_out\"/>") !=
          std::string::npos);
    CHECK(validate(dir, "timeout.xml", xml) == 0);
  }
  SECTION("launch failure: spawn error and a rank never started") {
    air::test::SampleRun run;
    run.outcome.status = air::RunOutcome::Status::launch_failed;
    run.outcome.ranks.resize(2);
    run.outcome.ranks[0] = air::test::make_rank(0, -1, air::ExitStatus::exited_with(127), 0);
    run.outcome.ranks[0].spawn_error = "execve x: No such file or directory";
    run.outcome.ranks[1] = air::test::make_rank(1, -1, air::ExitStatus{}, 0);
    air::RunReport report{run.spec, run.hardware, run.selection, run.plan, run.outcome, "h", 127, {}, {}};
    const std::string xml = air::junit_xml(report);
    CHECK(xml.find("tests=\"2\" failures=\"0\" errors=\"1\" skipped=\"1\"") != std::string::npos);
    CHECK(xml.find("<error message=\"could not be started: execve x: No such file or directory\" "
                   "type=\"spawn_error\"/>") != std::string::npos);
    CHECK(xml.find("<skipped message=\"not started\"/>") != std::string::npos);
    CHECK(validate(dir, "launch.xml", xml) == 0);
  }
  SECTION("the schema is not vacuous") {
    CHECK(validate(dir, "bad.xml", "<?xml version=\"1.0\"?>\n<testsuite name=\"x\"/>\n") != 0);
  }
}

TEST_CASE("junit: names stay the same from run to run", "[junit]") {
  air::test::SampleRun run;
  run.plan.run_id = "first";
  const std::string a = air::junit_xml(air::test::sample_report(run));
  air::test::SampleRun again;
  again.plan.run_id = "second";
  const std::string b = air::junit_xml(air::test::sample_report(again));
  const auto names = [](const std::string& xml) {
    std::string out;
    for (auto at = xml.find("classname="); at != std::string::npos; at = xml.find("classname=", at + 1))
      out += xml.substr(at, xml.find(' ', at) - at) + ";";
    return out + xml.substr(xml.find("<testsuite name="), 30);
  };
  CHECK(names(a) == names(b));
  CHECK(a.find("air-run.job") != std::string::npos);
}

TEST_CASE("junit: a failure without an error file names the exception from the output", "[junit]") {
  air::test::SampleRun run;
  run.outcome.ranks[1].tail = {"step 3",
                               "Traceback (most recent call last):", "  File \"t.py\", line 9, in f",
                               "ValueError: bad shape (3, 4)"};
  air::RunReport report = air::test::sample_report(run);
  report.errors[1]->source = air::RankError::Source::output_tail;
  const std::string xml = air::junit_xml(report);
  CHECK(xml.find("<failure message=\"ValueError: bad shape (3, 4) (exit code 3)\"") != std::string::npos);
}

TEST_CASE("junit: a refused launch is one failed launch case under the job's name", "[junit]") {
  air::test::RefusedRun run;
  const std::string xml = air::junit_xml(air::test::refused_report(run));
  CHECK(xml.find(R"(<testsuite name="job" tests="1" failures="1" errors="0" skipped="0")") !=
        std::string::npos);
  CHECK(xml.find(R"(<testcase classname="air-run.job" name="launch" time="0.000">)") != std::string::npos);
  CHECK(xml.find(R"x(<failure message="ci/job.yaml:2:1: unknown key &apos;tiemout&apos; (did you mean )x"
                 R"x(&apos;timeout&apos;?)" type="launch_refused_usage">)x") != std::string::npos);
  CHECK(xml.find(R"(<property name="status" value="launch_failed"/>)") != std::string::npos);
  if (have_xmllint()) {
    air::test::TempDir dir;
    CHECK(validate(dir, "refused.xml", xml) == 0);
  }
}
