#include "core/warm/warm_choice.hpp"
#include "tests/unit/catch.hpp"
#include "tests/unit/temp_dir.hpp"

#include <string>
#include <vector>

namespace {

/// A spec of `python -u train.py` with `preload` as settled (auto: {"auto"}).
air::LaunchSpec python_spec(std::vector<std::string> preload, int max_restarts = 0) {
  air::LaunchSpec spec;
  spec.python.value = "/usr/bin/python3";
  spec.command.value = {"train.py"};
  spec.preload.value = std::move(preload);
  spec.max_restarts.value = max_restarts;
  return spec;
}

const std::optional<std::string> k_imports = "line 1: import torch";

} // namespace

TEST_CASE("torch_import_in finds torch and the libraries built on it, not comments", "[warm_start]") {
  CHECK(air::torch_import_in("import os\nimport torch\n") == "line 2: import torch");
  CHECK(air::torch_import_in("import os, torch.distributed as dist\n") ==
        "line 1: import os, torch.distributed as dist");
  CHECK(air::torch_import_in("from transformers import Trainer\n") ==
        "line 1: from transformers import Trainer");
  CHECK(air::torch_import_in("def main():\n    import lightning as L\n") == "line 2: import lightning as L");
  CHECK(air::torch_import_in("import sys; import accelerate\n") == "line 1: import accelerate");
  CHECK_FALSE(air::torch_import_in("# import torch\nimport torchy\nfrom torchfoo import x\n"));
  CHECK_FALSE(air::torch_import_in("import os\nprint('import torch')\n"));
  CHECK_FALSE(air::torch_import_in(""));
}

TEST_CASE("the warm start's choice: auto only where it cannot slow the launch", "[warm_start]") {
  // More ranks than CPUs: every attempt forks (one import, not eight queued).
  auto c = air::choose_warm_start(python_spec({"auto"}), 8, 2, k_imports);
  CHECK(c.modules == std::vector<std::string>{"torch"});
  CHECK(c.first_attempt);
  // CPUs to spare and restarts possible: the first attempt starts fresh.
  c = air::choose_warm_start(python_spec({"auto"}, 3), 8, 16, k_imports);
  CHECK(c.modules == std::vector<std::string>{"torch"});
  CHECK_FALSE(c.first_attempt);
  CHECK(c.why.find("the first attempt starts fresh") != std::string::npos);
  // CPUs to spare, no restarts: nothing would fork, so nothing starts.
  c = air::choose_warm_start(python_spec({"auto"}), 8, 16, k_imports);
  CHECK(c.modules.empty());
  CHECK(c.why == "warm start: off (auto: no restarts, and 8 rank(s) on 16 CPU(s) import torch side by side)");
  // No torch import found: off.
  c = air::choose_warm_start(python_spec({"auto"}, 3), 8, 2, std::nullopt);
  CHECK(c.modules.empty());
  CHECK(c.why == "warm start: off (auto: found no import of torch in train.py)");
  // A list is the user's choice: every attempt forks, whatever the CPUs.
  c = air::choose_warm_start(python_spec({"torch", "numpy"}), 1, 64, std::nullopt);
  CHECK(c.modules == std::vector<std::string>{"torch", "numpy"});
  CHECK(c.first_attempt);
  // Off, and a target that is no Python program.
  CHECK(air::choose_warm_start(python_spec({}), 8, 2, k_imports).modules.empty());
  auto shell = python_spec({"auto"}, 3);
  shell.command.value = {"train.sh"};
  c = air::choose_warm_start(shell, 8, 2, k_imports);
  CHECK(c.modules.empty());
  CHECK(c.why.find("not Python programs") != std::string::npos);
}

TEST_CASE("AIR_RUN_TARGET_MODULES tells auto what a worker module's call uses", "[warm_start]") {
  air::Environment env;
  CHECK_FALSE(air::torch_in_target_modules(env));
  env["AIR_RUN_TARGET_MODULES"] = "";
  CHECK_FALSE(air::torch_in_target_modules(env));
  env["AIR_RUN_TARGET_MODULES"] = "numpy,os,torchy";
  CHECK_FALSE(air::torch_in_target_modules(env));
  env["AIR_RUN_TARGET_MODULES"] = "numpy, transformers ,torch";
  CHECK(air::torch_in_target_modules(env) == "uses transformers (AIR_RUN_TARGET_MODULES)");

  // `-m air._worker` whose file imports no torch: the variable decides.
  const air::test::TempDir dir;
  dir.write("worker.py", "import pickle, sys\n");
  air::LaunchSpec spec = python_spec({"auto"}, 1);
  spec.module.value = true;
  spec.command.value = {"worker"};
  air::Environment worker_env{{"PYTHONPATH", dir.path()}};
  CHECK_FALSE(air::find_torch_import(spec, worker_env));
  worker_env["AIR_RUN_TARGET_MODULES"] = "torch";
  CHECK(air::find_torch_import(spec, worker_env) == "uses torch (AIR_RUN_TARGET_MODULES)");
  // The file's own import comes first, when it has one.
  dir.write("worker.py", "import torch\n");
  CHECK(air::find_torch_import(spec, worker_env) == "line 1: import torch");
}

TEST_CASE("a variable torch reads at import, set before the import, is found", "[warm_start]") {
  CHECK(air::import_time_setting_in("import os\nos.environ[\"OMP_NUM_THREADS\"] = \"2\"\nimport torch\n") ==
        "line 2: os.environ[\"OMP_NUM_THREADS\"] = \"2\"");
  CHECK(air::import_time_setting_in("import os\nos.environ.setdefault('PYTORCH_CUDA_ALLOC_CONF', 'x')\n"
                                    "import torch\n") ==
        "line 2: os.environ.setdefault('PYTORCH_CUDA_ALLOC_CONF', 'x')");
  // A dict over several lines: the name on one line, the environment on another.
  CHECK(air::import_time_setting_in("import os\nos.environ.update({\n    'MKL_NUM_THREADS': '4',\n})\n"
                                    "from transformers import Trainer\n") ==
        "line 3: 'MKL_NUM_THREADS': '4',");
  // After the import, a fresh interpreter ignores it as well: nothing to honour.
  CHECK_FALSE(air::import_time_setting_in("import torch\nimport os\nos.environ['OMP_NUM_THREADS'] = '2'\n"));
  // CUDA and NCCL read theirs when they start, in the rank: honoured warm.
  CHECK_FALSE(
      air::import_time_setting_in("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\nimport torch\n"));
  // A name in a comment, or no touch of the environment, is no setting.
  CHECK_FALSE(air::import_time_setting_in("# os.environ['OMP_NUM_THREADS'] = '2'\nimport torch\n"));
  CHECK_FALSE(air::import_time_setting_in("print('OMP_NUM_THREADS')\nimport torch\n"));
}

TEST_CASE("a script that sets torch's import-time variables starts every rank fresh", "[warm_start]") {
  const std::optional<std::string> setting = "train.py line 2: os.environ[\"OMP_NUM_THREADS\"] = \"2\"";
  for (const auto& preload : {std::vector<std::string>{"auto"}, std::vector<std::string>{"torch"}}) {
    const auto c = air::choose_warm_start(python_spec(preload, 3), 8, 2, k_imports, setting);
    CHECK(c.modules.empty());
    CHECK(c.fresh_reason ==
          "it sets a variable torch reads at import before importing torch (train.py line 2: "
          "os.environ[\"OMP_NUM_THREADS\"] = \"2\"): a rank forked with torch imported would "
          "not honour it");
    CHECK(c.why.starts_with("warm start: off: train.py sets a variable torch reads at import"));
  }
  // Off stays off, with no reason to give.
  CHECK(air::choose_warm_start(python_spec({}, 3), 8, 2, k_imports, setting).fresh_reason.empty());
}
