// The one parser of accelerator types: canonical forms, legacy models, exact errors.
#include "core/spec/accelerator_type.hpp"
#include "tests/unit/catch.hpp"

#include <string>

TEST_CASE("parse_accelerator_type accepts CPU, GPU_<n>x<MODEL> and legacy models", "[spec]") {
  auto cpu = air::parse_accelerator_type("cpu");
  REQUIRE(cpu.ok());
  CHECK(cpu->cpu);
  CHECK(cpu->canonical() == "CPU");

  auto eight = air::parse_accelerator_type("GPU_8xH100");
  REQUIRE(eight.ok());
  CHECK_FALSE(eight->cpu);
  CHECK(eight->count == 8);
  CHECK(eight->model == "H100");
  CHECK_FALSE(eight->legacy);
  CHECK(eight->canonical() == "GPU_8xH100");

  auto lower = air::parse_accelerator_type("gpu_2xh200");
  REQUIRE(lower.ok());
  CHECK(lower->canonical() == "GPU_2xH200");

  auto rtx = air::parse_accelerator_type("GPU_2xRTX4090");
  REQUIRE(rtx.ok());
  CHECK(rtx->canonical() == "GPU_2xRTX4090");

  auto padded = air::parse_accelerator_type("GPU_0008xB300");
  REQUIRE(padded.ok());
  CHECK(padded->canonical() == "GPU_8xB300");

  // A legacy model names the family only: no count.
  auto legacy = air::parse_accelerator_type("a10");
  REQUIRE(legacy.ok());
  CHECK(legacy->legacy);
  CHECK(legacy->count == 0);
  CHECK(legacy->canonical() == "A10");
}

TEST_CASE("parse_accelerator_type rejects malformed types with exact messages", "[spec]") {
  const auto message = [](std::string_view text) {
    auto parsed = air::parse_accelerator_type(text);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().kind == air::ErrorKind::usage);
    return parsed.error().message;
  };
  const auto form = [](std::string_view text) {
    return "expected CPU or GPU_<n>x<MODEL> (like GPU_8xH100), got '" + std::string(text) + "'";
  };
  CHECK(message("GPU_0xH100") == "count must be at least 1, got 'GPU_0xH100'");
  for (const char* text : {"TPU_v4", "", "GPU_xH100", "GPU_8x", "GPU_8xH-100", "GPU_-1xH100", "GPU", "TPU",
                           "8xH100", "100", "H"}) {
    CHECK(message(text) == form(text));
  }
  CHECK(message("GPU_99999999999xH100") == "count is too large (at most 9999), got 'GPU_99999999999xH100'");
  CHECK(message("GPU_10000xH100") == "count is too large (at most 9999), got 'GPU_10000xH100'");
  CHECK(air::parse_accelerator_type("GPU_9999xH100").ok());
}
