// air-nccl-check: the all-reduce half of `air-run --check`.
//
// One process drives every visible GPU (air-run sets CUDA_VISIBLE_DEVICES to
// the selected UUIDs): ncclCommInitAll, then for each message size from
// --min-bytes to --max-bytes (powers of two) a few warmup all-reduces and a
// timed loop of out-of-place float sums, timed with CUDA events on every
// GPU's stream. The result is one JSON object on stdout (schema 1, parsed by
// core/preflight/nccl_check.cpp); exit 0 when the sweep ran and every sampled sum was
// right, 1 on any CUDA/NCCL error or wrong sum (the JSON says which), 2 on
// bad arguments. Plain C++ against the CUDA runtime and NCCL: no kernels of
// its own, so no nvcc.
//
// Bandwidth is computed as nccl-tests does (doc/PERFORMANCE.md there):
// algbw = bytes / time, busbw = algbw * 2(n-1)/n for all-reduce, which makes
// the number comparable across GPU counts and with the hardware link speed.
#include <nlohmann/json.hpp>

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr std::size_t kMiB = std::size_t{1} << 20;

struct Options {
  std::size_t min_bytes = 1 * kMiB;
  std::size_t max_bytes = 256 * kMiB;
  int warmup = 5;
  int iters = 20; ///< at --max-bytes; smaller sizes run more (see iterations_for)
};

/// Iterations for one size: `iters` at the largest size and proportionally
/// more for smaller ones (same bytes moved per size), at most 200, so small
/// sizes average over enough launches and the whole sweep stays well under a
/// second on NVLink. scripts/torch-allreduce-bench.py uses the same rule.
int iterations_for(std::size_t bytes, const Options& options) {
  const double scaled = static_cast<double>(options.iters) * static_cast<double>(options.max_bytes) /
                        static_cast<double>(bytes);
  return static_cast<int>(std::clamp(scaled, static_cast<double>(options.iters), 200.0));
}

/// The value rank `rank` contributes at element `j`: small integers, so the
/// float sum is exact for any GPU count and any reduction order.
float contribution(std::size_t j, int rank) {
  return static_cast<float>(j % 64 + 1) * static_cast<float>(rank + 1);
}
float expected_sum(std::size_t j, int n) {
  return static_cast<float>(j % 64 + 1) * static_cast<float>(n * (n + 1) / 2);
}

/// The first error wins; everything after it is skipped.
struct Failure {
  std::string message;
  explicit operator bool() const { return !message.empty(); }
};

bool cuda_ok(cudaError_t rc, const char* call, Failure& failure) {
  if (rc == cudaSuccess) return true;
  if (!failure) failure.message = std::string(call) + ": " + cudaGetErrorString(rc);
  return false;
}

bool nccl_ok(ncclResult_t rc, const char* call, Failure& failure) {
  if (rc == ncclSuccess) return true;
  if (!failure) {
    failure.message = std::string(call) + ": " + ncclGetErrorString(rc);
    const char* last = ncclGetLastError(nullptr);
    if (last != nullptr && *last != '\0') failure.message += std::string(" (") + last + ")";
  }
  return false;
}

/// Per GPU: its stream, buffers, events and communicator.
struct Gpu {
  int device = 0;
  cudaStream_t stream = nullptr;
  float* send = nullptr;
  float* recv = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  ncclComm_t comm = nullptr;
};

/// Parses a size: a number with an optional K/M/G suffix (binary units).
bool parse_size(std::string_view text, std::size_t& out) {
  if (text.empty()) return false;
  std::size_t multiplier = 1;
  const char suffix = text.back();
  if (suffix == 'K' || suffix == 'k') multiplier = std::size_t{1} << 10;
  if (suffix == 'M' || suffix == 'm') multiplier = std::size_t{1} << 20;
  if (suffix == 'G' || suffix == 'g') multiplier = std::size_t{1} << 30;
  if (multiplier != 1) text.remove_suffix(1);
  if (text.empty() || text.size() > 12) return false;
  std::size_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::size_t>(c - '0');
  }
  out = value * multiplier;
  return out > 0;
}

bool parse_count(std::string_view text, int& out, int min) {
  std::size_t value = 0;
  if (!parse_size(text, value) || value > 100000 || static_cast<int>(value) < min) return false;
  out = static_cast<int>(value);
  return true;
}

constexpr const char* kUsage =
    "usage: air-nccl-check [--min-bytes N] [--max-bytes N] [--warmup N] [--iters N]\n"
    "All-reduce bandwidth over every visible GPU in one process; JSON on stdout.\n"
    "Sizes take K/M/G suffixes (binary). Defaults: 1M to 256M, warmup 5, iters 20.\n";

/// Parses argv into `options`; false (after a message on stderr) on bad input.
bool parse_args(int argc, char** argv, Options& options, bool& help) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help = true;
      return true;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "air-nccl-check: %s needs a value\n%s", argv[i], kUsage);
      return false;
    }
    const std::string_view value = argv[++i];
    bool ok = false;
    if (arg == "--min-bytes")
      ok = parse_size(value, options.min_bytes);
    else if (arg == "--max-bytes")
      ok = parse_size(value, options.max_bytes);
    else if (arg == "--warmup")
      ok = parse_count(value, options.warmup, 0);
    else if (arg == "--iters")
      ok = parse_count(value, options.iters, 1);
    if (!ok) {
      std::fprintf(stderr, "air-nccl-check: bad argument %s %s\n%s", argv[i - 1], argv[i], kUsage);
      return false;
    }
  }
  // Floats: sizes must be whole numbers of 4-byte elements.
  if (options.min_bytes % 4 != 0 || options.max_bytes % 4 != 0 || options.min_bytes > options.max_bytes) {
    std::fprintf(stderr, "air-nccl-check: sizes must be multiples of 4 with --min-bytes <= --max-bytes\n");
    return false;
  }
  return true;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Fills `gpu.send` with contribution(j, rank): one 256 KiB pattern block
/// copied from the host, then doubled on the device until the buffer is full
/// (the pattern period, 64, divides every block size).
bool fill_send_buffer(const Gpu& gpu, int rank, std::size_t bytes, Failure& failure) {
  const std::size_t block_floats = std::min<std::size_t>(bytes / sizeof(float), 64 * 1024);
  std::vector<float> block(block_floats);
  for (std::size_t j = 0; j < block_floats; ++j) block[j] = contribution(j, rank);
  if (!cuda_ok(cudaMemcpy(gpu.send, block.data(), block_floats * sizeof(float), cudaMemcpyHostToDevice),
               "cudaMemcpy", failure)) {
    return false;
  }
  std::size_t filled = block_floats * sizeof(float);
  while (filled < bytes) {
    const std::size_t chunk = std::min(filled, bytes - filled);
    char* base = reinterpret_cast<char*>(gpu.send);
    if (!cuda_ok(cudaMemcpy(base + filled, base, chunk, cudaMemcpyDeviceToDevice), "cudaMemcpy", failure)) {
      return false;
    }
    filled += chunk;
  }
  // Device-to-device cudaMemcpy does not wait on the host, and the legacy
  // default stream it runs on does not order against our non-blocking
  // streams: finish the fill before any all-reduce reads it.
  return cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize", failure);
}

/// One all-reduce on every GPU, issued as one NCCL group (required when one
/// thread drives several devices, or the first call would wait for the others).
bool all_reduce(std::vector<Gpu>& gpus, std::size_t count, Failure& failure) {
  if (!nccl_ok(ncclGroupStart(), "ncclGroupStart", failure)) return false;
  for (auto& gpu : gpus) {
    const ncclResult_t rc =
        ncclAllReduce(gpu.send, gpu.recv, count, ncclFloat, ncclSum, gpu.comm, gpu.stream);
    if (rc != ncclSuccess) {
      nccl_ok(rc, "ncclAllReduce", failure);
      ncclGroupEnd();
      return false;
    }
  }
  return nccl_ok(ncclGroupEnd(), "ncclGroupEnd", failure);
}

/// Reads a few elements (start, middle, end) of every GPU's result back and
/// compares them with the exact sum.
bool sums_correct(const std::vector<Gpu>& gpus, std::size_t count, Failure& failure) {
  const int n = static_cast<int>(gpus.size());
  const std::size_t window = std::min<std::size_t>(count, 8);
  for (const auto& gpu : gpus) {
    if (!cuda_ok(cudaSetDevice(gpu.device), "cudaSetDevice", failure)) return false;
    for (const std::size_t first : {std::size_t{0}, (count - window) / 2, count - window}) {
      float host[8] = {};
      if (!cuda_ok(cudaMemcpy(host, gpu.recv + first, window * sizeof(float), cudaMemcpyDeviceToHost),
                   "cudaMemcpy", failure)) {
        return false;
      }
      for (std::size_t k = 0; k < window; ++k) {
        if (host[k] != expected_sum(first + k, n)) return false;
      }
    }
  }
  return true;
}

/// Times `iters` all-reduces of `bytes` after `warmup` untimed ones; returns
/// the mean time of one in microseconds (the slowest GPU's events), or < 0.
double time_size(std::vector<Gpu>& gpus, std::size_t bytes, int warmup, int iters, Failure& failure) {
  const std::size_t count = bytes / sizeof(float);
  for (auto& gpu : gpus) {
    // Poison the result (0xFF.. is a NaN) so an all-reduce that wrote nothing cannot pass.
    if (!cuda_ok(cudaSetDevice(gpu.device), "cudaSetDevice", failure) ||
        !cuda_ok(cudaMemsetAsync(gpu.recv, 0xFF, bytes, gpu.stream), "cudaMemsetAsync", failure)) {
      return -1;
    }
  }
  for (int i = 0; i < warmup; ++i) {
    if (!all_reduce(gpus, count, failure)) return -1;
  }
  for (auto& gpu : gpus) {
    if (!cuda_ok(cudaSetDevice(gpu.device), "cudaSetDevice", failure) ||
        !cuda_ok(cudaEventRecord(gpu.start, gpu.stream), "cudaEventRecord", failure)) {
      return -1;
    }
  }
  for (int i = 0; i < iters; ++i) {
    if (!all_reduce(gpus, count, failure)) return -1;
  }
  float slowest_ms = 0;
  for (auto& gpu : gpus) {
    float ms = 0;
    if (!cuda_ok(cudaSetDevice(gpu.device), "cudaSetDevice", failure) ||
        !cuda_ok(cudaEventRecord(gpu.stop, gpu.stream), "cudaEventRecord", failure)) {
      return -1;
    }
    if (!cuda_ok(cudaEventSynchronize(gpu.stop), "cudaEventSynchronize", failure) ||
        !cuda_ok(cudaEventElapsedTime(&ms, gpu.start, gpu.stop), "cudaEventElapsedTime", failure)) {
      return -1;
    }
    slowest_ms = std::max(slowest_ms, ms);
  }
  return static_cast<double>(slowest_ms) * 1000.0 / iters;
}

void release(std::vector<Gpu>& gpus) {
  for (auto& gpu : gpus) {
    cudaSetDevice(gpu.device);
    if (gpu.comm != nullptr) ncclCommDestroy(gpu.comm);
    if (gpu.start != nullptr) cudaEventDestroy(gpu.start);
    if (gpu.stop != nullptr) cudaEventDestroy(gpu.stop);
    if (gpu.send != nullptr) cudaFree(gpu.send);
    if (gpu.recv != nullptr) cudaFree(gpu.recv);
    if (gpu.stream != nullptr) cudaStreamDestroy(gpu.stream);
  }
}

std::string version_text(int code) {
  // NCCL_VERSION(X,Y,Z) is X*10000 + Y*100 + Z since 2.9 (X*1000 + Y*100 + Z before).
  if (code >= 10000)
    return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
           std::to_string(code % 100);
  return std::to_string(code / 1000) + "." + std::to_string(code / 100 % 10) + "." +
         std::to_string(code % 100);
}

int run(const Options& options) {
  const auto started = Clock::now();
  json out = {{"tool", "air-nccl-check"}, {"schema", 1}, {"ok", false}, {"error", nullptr}};
  Failure failure;
  std::vector<Gpu> gpus;
  json results = json::array();

  int version = 0;
  if (nccl_ok(ncclGetVersion(&version), "ncclGetVersion", failure))
    out["nccl_version"] = version_text(version);

  int n = 0;
  if (!failure && cuda_ok(cudaGetDeviceCount(&n), "cudaGetDeviceCount", failure) && n < 1) {
    failure.message = "no CUDA device visible";
  }
  json devices = json::array();
  for (int d = 0; !failure && d < n; ++d) {
    cudaDeviceProp prop{};
    char bus_id[32] = {};
    if (!cuda_ok(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties", failure) ||
        !cuda_ok(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, d), "cudaDeviceGetPCIBusId", failure)) {
      break;
    }
    devices.push_back({{"index", d}, {"name", prop.name}, {"pci_bus_id", bus_id}});
    Gpu gpu;
    gpu.device = d;
    gpus.push_back(gpu);
  }
  out["devices"] = devices;

  // Contexts, buffers and streams first, so init_s covers what a job pays too.
  for (auto& gpu : gpus) {
    if (failure) break;
    const bool ok =
        cuda_ok(cudaSetDevice(gpu.device), "cudaSetDevice", failure) &&
        cuda_ok(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking), "cudaStreamCreate", failure) &&
        cuda_ok(cudaMalloc(reinterpret_cast<void**>(&gpu.send), options.max_bytes), "cudaMalloc", failure) &&
        cuda_ok(cudaMalloc(reinterpret_cast<void**>(&gpu.recv), options.max_bytes), "cudaMalloc", failure) &&
        cuda_ok(cudaEventCreate(&gpu.start), "cudaEventCreate", failure) &&
        cuda_ok(cudaEventCreate(&gpu.stop), "cudaEventCreate", failure);
    if (!ok) break;
    fill_send_buffer(gpu, gpu.device, options.max_bytes, failure);
  }
  if (!failure) {
    std::vector<ncclComm_t> comms(gpus.size());
    std::vector<int> devlist(gpus.size());
    for (std::size_t i = 0; i < gpus.size(); ++i) devlist[i] = gpus[i].device;
    if (nccl_ok(ncclCommInitAll(comms.data(), static_cast<int>(gpus.size()), devlist.data()),
                "ncclCommInitAll", failure)) {
      for (std::size_t i = 0; i < gpus.size(); ++i) gpus[i].comm = comms[i];
    }
  }
  out["init_s"] = seconds_since(started);

  const double bus_factor = n > 0 ? 2.0 * (n - 1) / n : 0.0;
  bool all_correct = true;
  for (std::size_t bytes = options.min_bytes; !failure && bytes <= options.max_bytes; bytes *= 2) {
    const int iters = iterations_for(bytes, options);
    const double time_us = time_size(gpus, bytes, options.warmup, iters, failure);
    if (time_us < 0) break;
    const bool correct = sums_correct(gpus, bytes / sizeof(float), failure);
    if (failure) break;
    all_correct = all_correct && correct;
    const double algbw = time_us > 0 ? static_cast<double>(bytes) / (time_us * 1e-6) / 1e9 : 0.0;
    results.push_back({{"bytes", bytes},
                       {"iterations", iters},
                       {"time_us", time_us},
                       {"algbw_gbps", algbw},
                       {"busbw_gbps", algbw * bus_factor},
                       {"correct", correct}});
    if (bytes > options.max_bytes / 2) break; // the next doubling would pass the limit (or overflow)
  }
  release(gpus);

  if (!failure && !all_correct) failure.message = "an all-reduce produced a wrong sum";
  out["results"] = results;
  out["ok"] = !failure;
  if (failure) out["error"] = failure.message;
  out["total_s"] = seconds_since(started);
  std::fputs((out.dump() + "\n").c_str(), stdout);
  return failure ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  Options options;
  bool help = false;
  if (!parse_args(argc, argv, options, help)) return 2;
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  return run(options);
}
