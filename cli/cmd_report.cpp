// `air-run report SUMMARY.json [MORE.json ...] [--html PATH]`: the run's page
// drawn later, from summaries alone; several nodes' summaries of one job
// make one page.
#include "cli/commands.hpp"
#include "core/os/file_read.hpp"
#include "core/os/host.hpp"
#include "core/os/output_file.hpp"
#include "core/report/html_page.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <vector>

namespace air::cli {

namespace {

/// A summary is at most this large: 1,024 ranks with long error texts stay far below it.
constexpr std::uint64_t k_max_summary_bytes = 256ull << 20;

Expected<nlohmann::ordered_json> read_summary(const std::string& path) {
  const FileRead read = read_small_file(path, k_max_summary_bytes);
  if (read.state == FileRead::State::missing)
    return usage_error(fmt::format("report: {}: no such file", path));
  if (read.state == FileRead::State::too_large)
    return usage_error(fmt::format("report: {}: larger than {} MiB", path, k_max_summary_bytes >> 20));
  if (read.state != FileRead::State::ok) return usage_error(fmt::format("report: {}", read.error));
  auto doc = nlohmann::ordered_json::parse(read.text, nullptr, false);
  if (doc.is_discarded()) return usage_error(fmt::format("report: {}: not JSON", path));
  if (!doc.is_object() || !doc.contains("schema_version") || !doc.contains("outcome"))
    return usage_error(
        fmt::format("report: {}: not an air-run summary (no schema_version and outcome)", path));
  if (doc["schema_version"] != 1)
    return usage_error(
        fmt::format("report: {}: summary schema_version {} is not 1", path, doc["schema_version"].dump()));
  return doc;
}

} // namespace

bool is_report_command(const CliOptions& options) {
  // `report` is the command unless a program of that name is in the working
  // directory: `air-run report` then launches it, as it always did.
  std::error_code ec;
  return !options.command.empty() && options.command.front() == "report" &&
         !std::filesystem::exists("report", ec);
}

Expected<int> report_command(const CliOptions& options) {
  std::vector<std::string> files;
  std::string html;
  const std::vector<std::string>& args = options.command;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--html") {
      if (i + 1 >= args.size()) return usage_error("report: --html needs a PATH");
      html = args[++i];
    } else if (a.rfind("--html=", 0) == 0) {
      html = a.substr(7);
    } else if (a == "-h" || a == "--help") {
      std::fputs("usage: air-run report SUMMARY.json [MORE.json ...] [--html PATH]\n"
                 "Draws the run's HTML page from its JSON summaries (--summary), one per node; without\n"
                 "--html the page goes to stdout. See docs/html.md.\n",
                 stdout);
      return 0;
    } else if (a.size() > 1 && a[0] == '-') {
      return usage_error(fmt::format("report: unknown option '{}' (usage: air-run report SUMMARY.json "
                                     "[MORE.json ...] [--html PATH])",
                                     a));
    } else {
      files.push_back(a);
    }
  }
  if (files.empty())
    return usage_error("report: no summary given (usage: air-run report SUMMARY.json [MORE.json ...] "
                       "[--html PATH])");
  std::vector<nlohmann::ordered_json> docs;
  for (const std::string& file : files) {
    auto doc = read_summary(file);
    if (!doc) return doc.error();
    if (!docs.empty() && (*doc)["run_id"] != docs.front()["run_id"])
      return usage_error(fmt::format("report: {} is run {}, {} is run {}: one page draws one job",
                                     files.front(), docs.front()["run_id"].dump(), file,
                                     (*doc)["run_id"].dump()));
    docs.push_back(std::move(*doc));
  }
  const std::string page = html_page(docs);
  if (html.empty() || html == "-") {
    AIR_TRY(write_to_fd(STDOUT_FILENO, page, "stdout"));
    return 0;
  }
  const OutputTarget target = output_target(html);
  const auto dir = std::filesystem::path(target.path).parent_path();
  if (target.kind == OutputTarget::Kind::replace && !dir.empty()) AIR_TRY(make_directories(dir.string()));
  AIR_TRY(write_output_file(html, page));
  std::fputs(fmt::format("air-run: wrote {} ({} summar{}, {:.1f} kB)\n", html, docs.size(),
                         docs.size() == 1 ? "y" : "ies", static_cast<double>(page.size()) / 1000.0)
                 .c_str(),
             stderr);
  return 0;
}

} // namespace air::cli
