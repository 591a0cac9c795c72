#include "cli/output_paths.hpp"

#include "core/os/host.hpp"
#include "core/os/output_file.hpp"

#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace air::cli {

namespace {

namespace fs = std::filesystem;

bool is_folder(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool path_exists(const fs::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

/// The folder `path` is written into must be one, or be creatable: the
/// nearest part of it that exists must be a writable directory.
Status check_folder(const fs::path& folder, const std::string& what, const std::string& path, bool create) {
  fs::path existing = folder;
  while (!existing.empty() && !path_exists(existing)) existing = existing.parent_path();
  if (existing.empty()) existing = ".";
  if (!is_folder(existing))
    return usage_error(fmt::format("{} {}: {} is not a directory", what, path, existing.string()));
  if (::access(existing.c_str(), W_OK) != 0) {
    return usage_error(fmt::format("{} {}: folder {} is not writable", what, path, existing.string()));
  }
  if (create && existing != folder) {
    if (auto made = make_directories(folder.string()); !made)
      return usage_error(fmt::format("{} {}: {}", what, path, made.error().message));
  }
  return ok_status();
}

Status check_report_file(const std::string& path, const std::string& what, bool create) {
  if (path.empty()) return ok_status();
  if (is_folder(path)) return usage_error(fmt::format("{} {}: is a directory", what, path));
  // A device, FIFO or air-run's own stream is written in place (core/os/output_file.hpp):
  // its folder need not be writable, the file itself must be.
  const OutputTarget target = output_target(path);
  if (target.kind == OutputTarget::Kind::stream) return ok_status();
  if (target.kind == OutputTarget::Kind::in_place) {
    if (::access(path.c_str(), W_OK) != 0) return usage_error(fmt::format("{} {}: not writable", what, path));
    return ok_status();
  }
  if (path_exists(path) && ::access(path.c_str(), W_OK) != 0)
    return usage_error(fmt::format("{} {}: not writable", what, path));
  fs::path folder = fs::path(path).parent_path();
  return check_folder(folder.empty() ? fs::path(".") : folder, what, path, create);
}

/// The log directory up to its first per-rank placeholder: "logs/{rank}" is checked as "logs".
Status check_log_dir(const std::string& path) {
  if (path.empty()) return ok_status();
  fs::path fixed = path.substr(0, path.find('{'));
  if (path.find('{') != std::string::npos) fixed = fixed.parent_path();
  if (fixed.empty()) return ok_status();
  if (path_exists(fixed) && !is_folder(fixed))
    return usage_error(fmt::format("log directory {}: not a directory", fixed.string()));
  return check_folder(fixed, "log directory", path, false); // made later, with its ownership checks
}

} // namespace

Status check_output_paths(const LaunchSpec& spec, bool create, std::string* refused_key) {
  const auto refuse = [refused_key](const Error& error, const char* key) -> Status {
    if (refused_key != nullptr) *refused_key = key;
    return error;
  };
  if (auto ok = check_report_file(spec.summary_file.value, "summary file", create); !ok)
    return refuse(ok.error(), "summary_file");
  if (auto ok = check_report_file(spec.junit_file.value, "JUnit file", create); !ok)
    return refuse(ok.error(), "junit_file");
  if (auto ok = check_report_file(spec.html_file.value, "HTML page", create); !ok)
    return refuse(ok.error(), "html");
  if (auto ok = check_log_dir(spec.log_dir.value); !ok) return refuse(ok.error(), "log_dir");
  return ok_status();
}

} // namespace air::cli
