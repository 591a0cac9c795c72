// Stragglers: naming the ranks that fall behind, with their GPU's readings.
#include "core/run/stragglers.hpp"

#include "core/hw/nvml.hpp"

namespace air {

Stragglers::Stragglers(const RankTable& ranks) : ranks_(ranks) {}

Stragglers::~Stragglers() = default;

ConsoleBatch Stragglers::tick(ProgressWatch& progress, Clock::time_point now) {
  ConsoleBatch batch;
  if (now < next_check_) return batch;
  next_check_ = now + std::chrono::seconds(2);
  for (const std::string& line :
       progress.name_new_stragglers(ranks_.global_ranks(), [this](std::size_t i) { return explain(i); }))
    batch.say(line);
  return batch;
}

void Stragglers::finish(ProgressWatch& progress) {
  progress.name_new_stragglers(ranks_.global_ranks(), [this](std::size_t i) { return explain(i); });
}

std::string Stragglers::explain(std::size_t index) {
  const std::string& uuid = ranks_[index].plan->gpu_uuid;
  if (uuid.empty()) return {};
  if (!nvml_tried_) {
    nvml_tried_ = true;
    if (auto lib = NvmlLibrary::open()) nvml_ = std::make_unique<NvmlLibrary>(std::move(*lib));
  }
  if (!nvml_) return {};
  auto reading = nvml_->read_clock_reading(uuid);
  return reading ? describe_gpu_clocks(uuid, *reading) : std::string();
}

} // namespace air
