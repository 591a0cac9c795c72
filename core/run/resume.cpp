// Which checkpoint an attempt resumes from: air.data's latest(), in C++.
#include "core/run/resume.hpp"

#include "core/os/host.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

namespace air {

namespace {

/// The commit sequence of a checkpoint directory, or nullopt when it is not
/// complete (python/air/data/_checkpoint.py: checkpoints()).
std::optional<long long> commit_sequence(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(dir / k_checkpoint_metadata, ec)) return std::nullopt;
  const auto text = read_text_file((dir / k_checkpoint_marker).string(), "checkpoint marker");
  if (!text) return std::nullopt;
  const auto record = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return std::nullopt;
  const auto sequence = record.find("sequence");
  // An integer, as air.data writes it; Python's json gives a bool for true, which it skips too.
  if (sequence == record.end() || !sequence->is_number_integer()) return std::nullopt;
  return sequence->get<long long>();
}

} // namespace

std::optional<std::string> latest_checkpoint(const std::string& root) {
  std::error_code ec;
  std::filesystem::directory_iterator it(root, ec);
  if (ec) return std::nullopt;
  std::optional<std::pair<long long, std::string>> best;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return std::nullopt;
    const std::string name = it->path().filename().string();
    if (name.empty() || name.front() == '.') continue; // a save's work directory, or one being deleted
    const auto sequence = commit_sequence(it->path());
    if (!sequence) continue;
    std::pair<long long, std::string> key{*sequence, name};
    if (!best || key > *best) best = std::move(key);
  }
  if (!best) return std::nullopt;
  return (std::filesystem::path(root) / best->second).string();
}

Status prepare_checkpoint_dir(Setting<std::string>& dir, bool create) {
  if (dir.value.empty()) return ok_status();
  std::error_code ec;
  auto path = std::filesystem::absolute(dir.value, ec).lexically_normal();
  if (ec) {
    return usage_error(fmt::format("checkpoint_dir ({}): {} has no absolute path: {}", dir.origin.describe(),
                                   dir.value, ec.message()));
  }
  if (!path.has_filename() && path != path.root_path())
    path = path.parent_path(); // "/ckpt/" -> "/ckpt", as Python's abspath gives it
  dir.value = path.string();
  if (!create) return ok_status();
  std::filesystem::create_directories(path, ec);
  if (!ec && !std::filesystem::is_directory(path, ec)) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) {
    return usage_error(fmt::format("checkpoint_dir ({}): cannot create directory {}: {}",
                                   dir.origin.describe(), dir.value, ec.message()));
  }
  return ok_status();
}

void choose_resume_point(LaunchPlan& plan) {
  if (plan.checkpoint_dir.empty()) return;
  const auto found = latest_checkpoint(plan.checkpoint_dir);
  plan.resume_from = found.value_or("");
  for (auto& rank : plan.ranks) {
    if (found)
      rank.env["AIR_RESUME_FROM"] = *found;
    else
      rank.env.erase("AIR_RESUME_FROM");
  }
}

} // namespace air
