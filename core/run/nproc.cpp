// torchrun's --nproc-per-node against the detected hardware. Pure.
#include "core/run/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace air {

namespace {

bool is_cpu_type(const std::string& type) {
  std::string upper = type;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return upper == "CPU";
}

Selection on_cpu(int ranks) {
  Selection s;
  s.cpu = true;
  s.ranks = ranks;
  s.accelerator_type = "CPU";
  return s;
}

} // namespace

Expected<Selection> select_nproc_per_node(const NprocPerNode& nproc,
                                          const std::optional<std::string>& requested_type,
                                          const Hardware& hw, int cpu_count) {
  using Kind = NprocPerNode::Kind;
  const int cpus = std::max(cpu_count, 1);
  const bool force_cpu = requested_type && is_cpu_type(*requested_type);
  if (requested_type && !force_cpu) {
    return usage_error(fmt::format("nproc_per_node counts ranks itself: give accelerator_type {} "
                                   "with num_accelerators instead, or leave it out",
                                   *requested_type));
  }
  const bool gpus = !force_cpu && !hw.gpus.empty();
  int ranks = nproc.count;
  switch (nproc.kind) {
  case Kind::gpu:
    if (!gpus) {
      return Error{ErrorKind::hardware,
                   fmt::format("nproc_per_node gpu: CUDA is not available ({})",
                               force_cpu ? "accelerator_type is CPU"
                                         : (hw.reason.empty() ? std::string("no GPU detected") : hw.reason))};
    }
    ranks = static_cast<int>(hw.gpus.size());
    break;
  case Kind::cpu:
    return on_cpu(cpus);
  case Kind::auto_detect:
    if (!gpus) return on_cpu(cpus);
    ranks = static_cast<int>(hw.gpus.size());
    break;
  case Kind::count:
    if (!gpus) return on_cpu(ranks);
    break;
  }
  Selection s;
  const int available = static_cast<int>(hw.gpus.size());
  s.ranks = ranks;
  s.gpus.assign(hw.gpus.begin(), hw.gpus.begin() + std::min(ranks, available));
  s.accelerator_type = detected_accelerator_type(Hardware{s.gpus, {}, {}, {}, false, {}});
  if (ranks > available) {
    s.shared_gpus = true;
    s.notices.push_back(fmt::format("{} ranks on {} GPU(s): ranks share GPUs by LOCAL_RANK, as torchrun's "
                                    "--nproc-per-node allows (air-run's --num-accelerators would refuse)",
                                    ranks, available));
  }
  return s;
}

} // namespace air
