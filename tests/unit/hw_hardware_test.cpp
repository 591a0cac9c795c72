#include "core/hw/hardware.hpp"
#include "core/hw/nvml.hpp"
#include "tests/unit/catch.hpp"

#include <nlohmann/json.hpp>

#include <dlfcn.h>

using air::GpuInfo;
using air::Hardware;

namespace {

GpuInfo make_gpu(int index, std::string uuid, std::string bus, std::string name = "NVIDIA H200") {
  GpuInfo gpu;
  gpu.index = index;
  gpu.uuid = std::move(uuid);
  gpu.pci_bus_id = std::move(bus);
  gpu.name = std::move(name);
  gpu.model = air::model_family(gpu.name);
  return gpu;
}

/// Four GPUs whose NVML order is not their PCI order (index 0 sits on bus
/// 0x3B).
std::vector<GpuInfo> four_gpus() {
  return {make_gpu(0, "GPU-cccc1111-0000-0000-0000-000000000000", "00000000:3B:00.0"),
          make_gpu(1, "GPU-aaaa1111-0000-0000-0000-000000000000", "00000000:18:00.0"),
          make_gpu(2, "GPU-aaaa2222-0000-0000-0000-000000000000", "00000000:2A:00.0"),
          make_gpu(3, "GPU-dddd1111-0000-0000-0000-000000000000", "00000000:5D:00.0")};
}

std::vector<std::string> uuids(const std::vector<GpuInfo>& gpus) {
  std::vector<std::string> out;
  for (const auto& gpu : gpus) out.push_back(gpu.uuid.substr(0, 12));
  return out;
}

Hardware fake_hardware(const std::string& spec) {
  return air::detect_hardware({{"AIR_RUN_FAKE_GPUS", spec}});
}

using Strings = std::vector<std::string>;

} // namespace

TEST_CASE("model_family maps marketing names to families", "[hardware]") {
  using air::model_family;
  CHECK(model_family("NVIDIA H100 80GB HBM3") == "H100");
  CHECK(model_family("NVIDIA H100 PCIe") == "H100");
  CHECK(model_family("NVIDIA H100 NVL") == "H100");
  CHECK(model_family("NVIDIA H200") == "H200");
  CHECK(model_family("NVIDIA H200 NVL") == "H200");
  CHECK(model_family("NVIDIA GH200 480GB") == "GH200");
  CHECK(model_family("NVIDIA A10") == "A10");
  CHECK(model_family("NVIDIA A10G") == "A10");
  CHECK(model_family("NVIDIA A100-SXM4-80GB") == "A100");
  CHECK(model_family("NVIDIA A100 80GB PCIe") == "A100");
  CHECK(model_family("NVIDIA B300 SXM6 AC") == "B300");
  CHECK(model_family("NVIDIA B200") == "B200");
  CHECK(model_family("Tesla V100-SXM2-16GB") == "V100");
  CHECK(model_family("Tesla T4") == "T4");
  CHECK(model_family("NVIDIA L4") == "L4");
  CHECK(model_family("NVIDIA L40S") == "L40S");
  CHECK(model_family("NVIDIA GeForce RTX 4090") == "RTX4090");
  CHECK(model_family("NVIDIA GeForce GTX 1080 Ti") == "GTX1080");
  CHECK(model_family("NVIDIA RTX A6000") == "A6000");
  CHECK(model_family("Quadro RTX 8000") == "RTX8000");
  CHECK(model_family("NVIDIA RTX 6000 Ada Generation") == "RTX6000");
  CHECK(model_family("NVIDIA RTX PRO 6000 Blackwell Server Edition") == "RTXPRO6000");
  CHECK(model_family("nvidia h100") == "H100");
  CHECK(model_family("") == "UNKNOWN");
  CHECK(model_family("NVIDIA") == "UNKNOWN");
}

TEST_CASE("parse_fake_gpus builds deterministic GPUs", "[hardware]") {
  auto gpus = air::parse_fake_gpus("2xNVIDIA H100 80GB HBM3; NVIDIA A10 ;NVIDIA L4");
  REQUIRE(gpus.ok());
  REQUIRE(gpus->size() == 4);
  const auto& g = *gpus;
  CHECK(g[0].index == 0);
  CHECK(g[0].uuid == "GPU-00000000-0000-0000-0000-000000000001");
  CHECK(g[0].pci_bus_id == "00000000:01:00.0");
  CHECK(g[0].name == "NVIDIA H100 80GB HBM3");
  CHECK(g[0].model == "H100");
  CHECK(g[0].memory_total_bytes == 80ULL << 30);
  CHECK(g[1].uuid == "GPU-00000000-0000-0000-0000-000000000002");
  CHECK(g[2].index == 2);
  CHECK(g[2].name == "NVIDIA A10");
  CHECK(g[2].model == "A10");
  CHECK(g[2].memory_total_bytes == 24ULL << 30);
  CHECK(g[3].model == "L4");
  CHECK(g[3].memory_total_bytes == 0);
  CHECK(g[3].pci_bus_id == "00000000:04:00.0");

  auto many = air::parse_fake_gpus("16xNVIDIA H200;NVIDIA B300 SXM6 AC");
  REQUIRE(many.ok());
  REQUIRE(many->size() == 17);
  CHECK((*many)[15].pci_bus_id == "00000000:10:00.0");
  CHECK((*many)[15].uuid == "GPU-00000000-0000-0000-0000-000000000010");
  CHECK((*many)[15].memory_total_bytes == 141ULL << 30);
  CHECK((*many)[16].memory_total_bytes == 288ULL << 30);

  auto none = air::parse_fake_gpus("  ");
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("parse_fake_gpus rejects bad syntax with exact messages", "[hardware]") {
  const auto message = [](std::string_view text) {
    auto parsed = air::parse_fake_gpus(text);
    REQUIRE_FALSE(parsed.ok());
    return parsed.error().message;
  };
  const std::string form = "expected [<count>x]<name>, e.g. 8xNVIDIA H100 80GB HBM3";
  CHECK(message("0xA10") == "AIR_RUN_FAKE_GPUS entry '0xA10': count must be at least 1");
  CHECK(message("x") == "AIR_RUN_FAKE_GPUS entry 'x': " + form);
  CHECK(message("3x") == "AIR_RUN_FAKE_GPUS entry '3x': " + form);
  CHECK(message("xNVIDIA A10") == "AIR_RUN_FAKE_GPUS entry 'xNVIDIA A10': " + form);
  CHECK(message("4090") == "AIR_RUN_FAKE_GPUS entry '4090': " + form);
  CHECK(message("NVIDIA A10;;NVIDIA L4") == "AIR_RUN_FAKE_GPUS entry 2 is empty in 'NVIDIA A10;;NVIDIA L4'");
  CHECK(message("200xNVIDIA A10;100xNVIDIA L4") == "AIR_RUN_FAKE_GPUS describes more than 255 GPUs");
  CHECK(message("99999999999xNVIDIA A10") == "AIR_RUN_FAKE_GPUS describes more than 255 GPUs");
}

TEST_CASE("detect_hardware reads AIR_RUN_FAKE_GPUS", "[hardware]") {
  const Hardware hw = fake_hardware("2xNVIDIA H200");
  CHECK(hw.source == "AIR_RUN_FAKE_GPUS");
  CHECK(hw.reason.empty());
  CHECK(hw.gpus.size() == 2);
  CHECK_FALSE(hw.cuda_visible_devices_set);
  CHECK(air::detected_accelerator_type(hw) == "GPU_2xH200");

  const Hardware empty = fake_hardware("");
  CHECK(empty.gpus.empty());
  CHECK(empty.source == "AIR_RUN_FAKE_GPUS");
  CHECK(empty.reason == "AIR_RUN_FAKE_GPUS is empty");
  CHECK(air::detected_accelerator_type(empty) == "CPU");

  for (const char* bad : {"0xA10", "x", "3x"}) {
    const Hardware broken = fake_hardware(bad);
    CHECK(broken.gpus.empty());
    CHECK(broken.source == "AIR_RUN_FAKE_GPUS");
    CHECK(broken.reason == air::parse_fake_gpus(bad).error().message);
  }
}

TEST_CASE("detect_hardware applies CUDA_VISIBLE_DEVICES to fake GPUs", "[hardware]") {
  const Hardware hw =
      air::detect_hardware({{"AIR_RUN_FAKE_GPUS", "4xNVIDIA H100 80GB HBM3"},
                            {"CUDA_VISIBLE_DEVICES", "2,GPU-00000000-0000-0000-0000-000000000001"}});
  CHECK(hw.cuda_visible_devices_set);
  CHECK(hw.cuda_visible_devices == "2,GPU-00000000-0000-0000-0000-000000000001");
  REQUIRE(hw.gpus.size() == 2);
  CHECK(hw.gpus[0].index == 2);
  CHECK(hw.gpus[1].index == 0);
  CHECK(hw.reason.empty());
  CHECK(hw.notes == Strings{"CUDA_VISIBLE_DEVICES=\"2,GPU-00000000-0000-0000-"
                            "0000-000000000001\" keeps 2 of "
                            "4 GPUs (indices in PCI bus order)"});
  CHECK(air::detected_accelerator_type(hw) == "GPU_2xH100");

  const Hardware hidden =
      air::detect_hardware({{"AIR_RUN_FAKE_GPUS", "2xNVIDIA H200"}, {"CUDA_VISIBLE_DEVICES", ""}});
  CHECK(hidden.gpus.empty());
  CHECK(hidden.cuda_visible_devices_set);
  CHECK(hidden.reason == "CUDA_VISIBLE_DEVICES=\"\" hides every GPU (0 of 2 kept)");

  const Hardware nothing = air::detect_hardware({{"AIR_RUN_FAKE_GPUS", ""}, {"CUDA_VISIBLE_DEVICES", "0"}});
  CHECK(nothing.gpus.empty());
  CHECK(nothing.reason == "AIR_RUN_FAKE_GPUS is empty");
  CHECK(nothing.notes == Strings{"CUDA_VISIBLE_DEVICES=\"0\" (no GPU detected to restrict)"});
}

TEST_CASE("apply_visible_devices follows CUDA's rules", "[hardware]") {
  const auto gpus = four_gpus(); // PCI order: aaaa1111, aaaa2222, cccc1111, dddd1111
  std::string note;

  SECTION("indices count in PCI bus order, in the value's order") {
    CHECK(uuids(air::apply_visible_devices(gpus, "2,0", &note)) == Strings{"GPU-cccc1111", "GPU-aaaa1111"});
    CHECK(note == "CUDA_VISIBLE_DEVICES=\"2,0\" keeps 2 of 4 GPUs (indices in "
                  "PCI bus order)");
    CHECK(uuids(air::apply_visible_devices(gpus, " 3 , 1 ", &note)) ==
          Strings{"GPU-dddd1111", "GPU-aaaa2222"});
  }
  SECTION("full UUIDs and unique prefixes") {
    CHECK(uuids(air::apply_visible_devices(gpus, "GPU-dddd1111-0000-0000-0000-000000000000,GPU-cc", &note)) ==
          Strings{"GPU-dddd1111", "GPU-cccc1111"});
    CHECK(uuids(air::apply_visible_devices(gpus, "GPU-AAAA2", &note)) == Strings{"GPU-aaaa2222"});
  }
  SECTION("an invalid entry ends the list") {
    CHECK(uuids(air::apply_visible_devices(gpus, "1,7,0", &note)) == Strings{"GPU-aaaa2222"});
    CHECK(note == "CUDA_VISIBLE_DEVICES=\"1,7,0\": entry '7' is out of range "
                  "(4 GPUs detected); as CUDA does, "
                  "it and the entries after it are ignored: 1 of 4 GPUs kept");
    CHECK(uuids(air::apply_visible_devices(gpus, "0,GPU-aaaa,3", &note)) == Strings{"GPU-aaaa1111"});
    CHECK(note == "CUDA_VISIBLE_DEVICES=\"0,GPU-aaaa,3\": entry 'GPU-aaaa' is "
                  "ambiguous: it prefixes 2 GPU "
                  "UUIDs; as CUDA does, it and the entries after it are "
                  "ignored: 1 of 4 GPUs kept");
    CHECK(air::apply_visible_devices(gpus, "GPU-ffff,0", &note).empty());
    CHECK(note == "CUDA_VISIBLE_DEVICES=\"GPU-ffff,0\": entry 'GPU-ffff' matches no "
                  "detected GPU UUID; as CUDA "
                  "does, it and the entries after it are ignored: 0 of 4 GPUs kept");
    CHECK(uuids(air::apply_visible_devices(gpus, "0,-1,1", &note)) == Strings{"GPU-aaaa1111"});
    CHECK(note == "CUDA_VISIBLE_DEVICES=\"0,-1,1\": entry '-1' is not a GPU "
                  "index or GPU- UUID; as CUDA does, "
                  "it and the entries after it are ignored: 1 of 4 GPUs kept");
    CHECK(uuids(air::apply_visible_devices(gpus, "0,,1", &note)) == Strings{"GPU-aaaa1111"});
    CHECK(uuids(air::apply_visible_devices(gpus, "1x,0", &note)).empty());
  }
  SECTION("duplicates are invalid") {
    CHECK(uuids(air::apply_visible_devices(gpus, "0,GPU-aaaa1,2", &note)) == Strings{"GPU-aaaa1111"});
    CHECK(note == "CUDA_VISIBLE_DEVICES=\"0,GPU-aaaa1,2\": entry 'GPU-aaaa1' repeats a "
                  "GPU already listed; as "
                  "CUDA does, it and the entries after it are ignored: 1 of 4 GPUs kept");
  }
  SECTION("MIG instances are not supported") {
    CHECK(uuids(air::apply_visible_devices(gpus, "0,MIG-1234", &note)) == Strings{"GPU-aaaa1111"});
    CHECK(note == "CUDA_VISIBLE_DEVICES=\"0,MIG-1234\": entry 'MIG-1234' names "
                  "a MIG instance, which air-run "
                  "does not support; as CUDA does, it and the entries after it "
                  "are ignored: 1 of 4 GPUs kept");
  }
  SECTION("-1 and empty hide every GPU") {
    CHECK(air::apply_visible_devices(gpus, "-1", &note).empty());
    CHECK(note == "CUDA_VISIBLE_DEVICES=\"-1\" hides every GPU (0 of 4 kept)");
    CHECK(air::apply_visible_devices(gpus, "", &note).empty());
    CHECK(note == "CUDA_VISIBLE_DEVICES=\"\" hides every GPU (0 of 4 kept)");
  }
  SECTION("a null note is allowed") { CHECK(air::apply_visible_devices(gpus, "0", nullptr).size() == 1); }
}

TEST_CASE("detected_accelerator_type names the most common family", "[hardware]") {
  Hardware hw;
  hw.gpus = {make_gpu(0, "GPU-1", "00000000:01:00.0", "NVIDIA A10"),
             make_gpu(1, "GPU-2", "00000000:02:00.0", "NVIDIA L4"),
             make_gpu(2, "GPU-3", "00000000:03:00.0", "NVIDIA L4")};
  CHECK(air::detected_accelerator_type(hw) == "GPU_2xL4");
  hw.gpus.pop_back();
  CHECK(air::detected_accelerator_type(hw) == "GPU_1xA10"); // a tie goes to the first seen
}

TEST_CASE("select_accelerators matches requests against hardware", "[hardware]") {
  const Hardware two_h200 = fake_hardware("2xNVIDIA H200");
  const Hardware none = fake_hardware("");
  using std::nullopt;

  SECTION("no type, GPUs: all of them, or the first N") {
    auto all = air::select_accelerators(nullopt, nullopt, 4, two_h200);
    REQUIRE(all.ok());
    CHECK_FALSE(all->cpu);
    CHECK(all->ranks == 2);
    CHECK(all->gpus.size() == 2);
    CHECK(all->accelerator_type == "GPU_2xH200");
    CHECK(all->notices.empty());

    auto one = air::select_accelerators(nullopt, 1, 4, two_h200);
    REQUIRE(one.ok());
    CHECK(one->ranks == 1);
    REQUIRE(one->gpus.size() == 1);
    CHECK(one->gpus[0].uuid == two_h200.gpus[0].uuid);
    CHECK(one->accelerator_type == "GPU_1xH200");

    auto three = air::select_accelerators(nullopt, 3, 4, two_h200);
    REQUIRE_FALSE(three.ok());
    CHECK(three.error().kind == air::ErrorKind::hardware);
    CHECK(three.error().message == "requested 3 accelerators, found GPU_2xH200");

    // cpu_ranks given on a GPU machine: the GPUs win, and the launcher says so
    // (a test that counted on 3 CPU ranks once got one rank per GPU unannounced).
    auto given = air::select_accelerators(nullopt, nullopt, 3, two_h200, true);
    REQUIRE(given.ok());
    CHECK_FALSE(given->cpu);
    CHECK(given->ranks == 2);
    CHECK(given->notices == Strings{"cpu_ranks 3 applies only where no GPU is found; running 2 rank(s), "
                                    "one per GPU (accelerator_type CPU runs 3 rank(s) on CPU)"});
  }
  SECTION("no type, no GPU: CPU with a notice") {
    auto cpu = air::select_accelerators(nullopt, nullopt, 3, none);
    REQUIRE(cpu.ok());
    CHECK(cpu->cpu);
    CHECK(cpu->ranks == 3);
    CHECK(cpu->gpus.empty());
    CHECK(cpu->accelerator_type == "CPU");
    CHECK(cpu->notices == Strings{"no GPU found (AIR_RUN_FAKE_GPUS is empty); "
                                  "running 3 rank(s) on CPU"});

    auto counted = air::select_accelerators(nullopt, 2, 3, none);
    REQUIRE(counted.ok());
    CHECK(counted->ranks == 2);
    CHECK(counted->notices == Strings{"no GPU found (AIR_RUN_FAKE_GPUS is "
                                      "empty); running 2 rank(s) on CPU"});

    // CPU ranks asked for: the CPU is what was wanted, nothing to notice.
    auto asked = air::select_accelerators(nullopt, nullopt, 3, none, true);
    REQUIRE(asked.ok());
    CHECK(asked->cpu);
    CHECK(asked->ranks == 3);
    CHECK(asked->notices.empty());
  }
  SECTION("explicit CPU ignores GPUs") {
    auto cpu = air::select_accelerators("CPU", nullopt, 5, two_h200);
    REQUIRE(cpu.ok());
    CHECK(cpu->cpu);
    CHECK(cpu->ranks == 5);
    CHECK(cpu->gpus.empty());
    CHECK(cpu->accelerator_type == "CPU");
    CHECK(cpu->notices.empty());
    auto counted = air::select_accelerators("cpu", 2, 5, two_h200);
    REQUIRE(counted.ok());
    CHECK(counted->ranks == 2);
  }
  SECTION("a matching type uses the GPUs") {
    auto match = air::select_accelerators("GPU_2xH200", nullopt, 4, two_h200);
    REQUIRE(match.ok());
    CHECK(match->ranks == 2);
    CHECK(match->gpus.size() == 2);
    CHECK(match->accelerator_type == "GPU_2xH200");
    CHECK(match->notices.empty());
    auto same_count = air::select_accelerators("GPU_2xH200", 2, 4, two_h200);
    REQUIRE(same_count.ok());
    CHECK(same_count->ranks == 2);
  }
  SECTION("fewer than available: the first n, with a notice") {
    auto fewer = air::select_accelerators("GPU_1xH200", nullopt, 4, two_h200);
    REQUIRE(fewer.ok());
    CHECK(fewer->ranks == 1);
    REQUIRE(fewer->gpus.size() == 1);
    CHECK(fewer->gpus[0].uuid == two_h200.gpus[0].uuid);
    CHECK(fewer->accelerator_type == "GPU_1xH200");
    CHECK(fewer->notices == Strings{"GPU_1xH200 requested: using the first 1 of 2 H200 GPUs"});
  }
  SECTION("legacy short models check the family; the count is num_accelerators, else every GPU of it") {
    auto counted = air::select_accelerators("h200", 1, 4, two_h200);
    REQUIRE(counted.ok());
    CHECK(counted->ranks == 1);
    CHECK(counted->accelerator_type == "GPU_1xH200");
    auto all = air::select_accelerators("H200", nullopt, 4, two_h200);
    REQUIRE(all.ok());
    CHECK(all->ranks == 2);
    CHECK(all->accelerator_type == "GPU_2xH200");
    CHECK(all->notices.empty());
    auto other_family = air::select_accelerators("H100", nullopt, 4, two_h200);
    REQUIRE_FALSE(other_family.ok());
    CHECK(other_family.error().message == "requested H100, found GPU_2xH200");
  }
  SECTION("mismatches are errors naming both sides") {
    const auto error_of = [](const air::Expected<air::Selection>& s) {
      REQUIRE_FALSE(s.ok());
      return s.error();
    };
    auto model = error_of(air::select_accelerators("GPU_8xH100", nullopt, 4, two_h200));
    CHECK(model.kind == air::ErrorKind::hardware);
    CHECK(model.message == "requested GPU_8xH100, found GPU_2xH200");
    auto too_many = error_of(air::select_accelerators("GPU_8xH200", nullopt, 4, two_h200));
    CHECK(too_many.kind == air::ErrorKind::hardware);
    CHECK(too_many.message == "requested GPU_8xH200, found GPU_2xH200");
    auto no_gpu = error_of(air::select_accelerators("GPU_1xH100", nullopt, 4, none));
    CHECK(no_gpu.kind == air::ErrorKind::hardware);
    CHECK(no_gpu.message == "requested GPU_1xH100, found no GPU (AIR_RUN_FAKE_GPUS is empty)");
    auto legacy_many = error_of(air::select_accelerators("H200", 3, 4, two_h200));
    CHECK(legacy_many.message == "requested GPU_3xH200, found GPU_2xH200");
  }
  SECTION("count conflicts and bad input are usage errors") {
    auto conflict = air::select_accelerators("GPU_2xH200", 1, 4, two_h200);
    REQUIRE_FALSE(conflict.ok());
    CHECK(conflict.error().kind == air::ErrorKind::usage);
    CHECK(conflict.error().message == "accelerator_type GPU_2xH200 asks for 2 "
                                      "accelerators but num_accelerators is 1");
    auto bad_type = air::select_accelerators("TPU_v4", nullopt, 4, two_h200);
    REQUIRE_FALSE(bad_type.ok());
    CHECK(bad_type.error().kind == air::ErrorKind::usage);
    CHECK(bad_type.error().message == "accelerator_type: expected CPU or GPU_<n>x<MODEL> (like "
                                      "GPU_8xH100), got 'TPU_v4'");
    auto zero = air::select_accelerators(nullopt, 0, 4, two_h200);
    REQUIRE_FALSE(zero.ok());
    CHECK(zero.error().message == "num_accelerators must be at least 1, got 0");
  }
  SECTION("a mixed machine is matched by model") {
    const Hardware mixed = fake_hardware("NVIDIA A10;2xNVIDIA L4");
    auto a10 = air::select_accelerators("GPU_1xA10", nullopt, 4, mixed);
    REQUIRE(a10.ok());
    REQUIRE(a10->gpus.size() == 1);
    CHECK(a10->gpus[0].model == "A10");
    auto l4 = air::select_accelerators("GPU_2xL4", nullopt, 4, mixed);
    REQUIRE(l4.ok());
    CHECK(l4->gpus.size() == 2);
    CHECK(l4->gpus[0].model == "L4");
    auto too_many = air::select_accelerators("GPU_2xA10", nullopt, 4, mixed);
    REQUIRE_FALSE(too_many.ok());
    CHECK(too_many.error().message == "requested GPU_2xA10, found GPU_1xA10");
  }
}

TEST_CASE("hardware_json has the documented shape", "[hardware]") {
  const Hardware hw =
      air::detect_hardware({{"AIR_RUN_FAKE_GPUS", "2xNVIDIA H200"}, {"CUDA_VISIBLE_DEVICES", "1"}});
  const auto doc = nlohmann::json::parse(air::hardware_json(hw));
  CHECK(doc.at("accelerator_type") == "GPU_1xH200");
  CHECK(doc.at("source") == "AIR_RUN_FAKE_GPUS");
  CHECK(doc.at("reason") == "");
  CHECK(doc.at("cuda_visible_devices") == "1");
  CHECK(doc.at("notes").size() == 1);
  REQUIRE(doc.at("gpus").size() == 1);
  const auto& gpu = doc.at("gpus").at(0);
  CHECK(gpu.size() == 6);
  CHECK(gpu.at("index") == 1);
  CHECK(gpu.at("uuid") == "GPU-00000000-0000-0000-0000-000000000002");
  CHECK(gpu.at("pci_bus_id") == "00000000:02:00.0");
  CHECK(gpu.at("name") == "NVIDIA H200");
  CHECK(gpu.at("model") == "H200");
  CHECK(gpu.at("memory_total_bytes") == 141ULL << 30);

  const auto empty = nlohmann::json::parse(air::hardware_json(fake_hardware("")));
  CHECK(empty.at("accelerator_type") == "CPU");
  CHECK(empty.at("reason") == "AIR_RUN_FAKE_GPUS is empty");
  CHECK(empty.at("cuda_visible_devices").is_null());
  CHECK(empty.at("gpus").is_array());
  CHECK(empty.at("gpus").empty());
}

TEST_CASE("describe_hardware prints a table and the binding rule", "[hardware]") {
  const Hardware hw = fake_hardware("NVIDIA H200;NVIDIA L4");
  CHECK(air::describe_hardware(hw) == "accelerator type: GPU_1xH200\n"
                                      "source: AIR_RUN_FAKE_GPUS\n"
                                      "index  name         model  uuid                                      "
                                      "pci bus id        memory\n"
                                      "0      NVIDIA H200  H200   GPU-00000000-0000-0000-0000-000000000001  "
                                      "00000000:01:00.0  141.0 GiB\n"
                                      "1      NVIDIA L4    L4     GPU-00000000-0000-0000-0000-000000000002  "
                                      "00000000:02:00.0  -\n"
                                      "CUDA_VISIBLE_DEVICES: unset\n"
                                      "NVML order is not CUDA order: ranks are bound by UUID (rows are in "
                                      "CUDA-visible order; index is "
                                      "NVML's)\n");

  const Hardware hidden =
      air::detect_hardware({{"AIR_RUN_FAKE_GPUS", "NVIDIA H200"}, {"CUDA_VISIBLE_DEVICES", "-1"}});
  CHECK(air::describe_hardware(hidden) == "accelerator type: CPU\n"
                                          "source: AIR_RUN_FAKE_GPUS\n"
                                          "no GPU found: CUDA_VISIBLE_DEVICES=\"-1\" hides every GPU (0 of 1 "
                                          "kept)\n"
                                          "CUDA_VISIBLE_DEVICES=\"-1\" hides every GPU (0 of 1 kept)\n");
}

TEST_CASE("NvmlLibrary reports a missing library or symbol as a reason", "[hardware]") {
  auto missing = air::NvmlLibrary::open("/nonexistent/libnvidia-ml.so.1");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.rfind("NVML not available: /nonexistent/libnvidia-ml.so.1: cannot open", 0) ==
        0);

  // libc is loadable but is no NVML: the first symbol lookup fails.
  auto not_nvml = air::NvmlLibrary::open("libc.so.6");
  REQUIRE_FALSE(not_nvml.ok());
  CHECK(not_nvml.error().message.rfind("NVML not available: ", 0) == 0);
  CHECK(not_nvml.error().message.find("undefined symbol: nvmlInit_v2") != std::string::npos);

  auto scan = air::scan_nvml_gpus("/nonexistent/libnvidia-ml.so.1");
  REQUIRE_FALSE(scan.ok());
  CHECK(scan.error().message == missing.error().message);
}

TEST_CASE("detect_hardware without fakes never fails", "[hardware]") {
  const Hardware hw = air::detect_hardware({});
  // Whether NVML exists depends on the machine; either way the result is
  // coherent.
  void* probe = dlopen(air::NvmlLibrary::kDefaultPath, RTLD_NOW | RTLD_LOCAL);
  if (probe == nullptr) {
    CHECK(hw.source == "none");
    CHECK(hw.gpus.empty());
    CHECK(hw.reason.rfind("NVML not available: libnvidia-ml.so.1", 0) == 0);
    CHECK(air::detected_accelerator_type(hw) == "CPU");
  } else {
    dlclose(probe);
    CHECK(hw.gpus.empty() != hw.reason.empty());
  }
  CHECK_FALSE(hw.cuda_visible_devices_set);
}

TEST_CASE("NVML finds the GPUs of a GPU machine", "[.gpu]") {
  auto library = air::NvmlLibrary::open();
  REQUIRE(library.ok());
  auto count = library->device_count();
  REQUIRE(count.ok());
  REQUIRE(*count >= 1);
  for (unsigned int i = 0; i < *count; ++i) {
    auto gpu = library->device_info(i);
    REQUIRE(gpu.ok());
    CHECK(gpu->uuid.rfind("GPU-", 0) == 0);
    CHECK(gpu->pci_bus_id.size() == 16); // "00000000:18:00.0"
    CHECK_FALSE(gpu->name.empty());
    CHECK(gpu->model != "UNKNOWN");
    CHECK(gpu->memory_total_bytes > 0);
  }
  CHECK(library->symbol("nvmlDeviceGetCount_v2") != nullptr);

  const Hardware hw = air::detect_hardware({});
  CHECK(hw.source == "nvml");
  CHECK(hw.reason.empty());
  CHECK(hw.gpus.size() == *count);
  CHECK(air::detected_accelerator_type(hw).rfind("GPU_", 0) == 0);
}

TEST_CASE("a straggler's GPU readings say what holds it down", "[hw][straggler]") {
  air::GpuClockReading r;
  CHECK(air::describe_gpu_clocks("GPU-1", r).empty()); // nothing read, nothing said
  r.sm_clock_mhz = 1410;
  r.sm_clock_max_mhz = 1980;
  r.clocks_event_reasons = 0x4 | 0x1 | 0x40; // power cap and thermal; idle is a state, left out
  r.temperature_c = 87;
  r.power_mw = 698'500;
  r.power_limit_mw = 700'000;
  CHECK(air::describe_gpu_clocks("GPU-1", r) ==
        "GPU-1: SM 1410 of 1980 MHz, held down by sw_power_cap, hw_thermal_slowdown, 87 C, 698 of 700 W");
  air::GpuClockReading calm;
  calm.sm_clock_mhz = 1980;
  calm.clocks_event_reasons = 0x10; // sync boost only: no reason named
  calm.power_mw = 300'000;
  CHECK(air::describe_gpu_clocks("GPU-2", calm) == "GPU-2: SM 1980 MHz, 300 W");
}
