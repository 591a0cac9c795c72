# Thin wrapper over CMake; every target is one or two commands.
BUILD ?= build
CMAKE_FLAGS ?=
# The interpreter that runs the Python ranks: python3 on PATH when it has torch
# (a GPU machine's own PyTorch), else Debian's, where `make deps` puts python3-torch.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell python3 -c 'import torch' >/dev/null 2>&1 && command -v python3 || echo /usr/bin/python3)
endif
DEPS ?= test
JOBS ?= $(shell nproc)

.PHONY: all deps configure build demo test unit e2e pytest asan fuzz format format-check lint bench clean

all: build

# DEPS: build, demo or test (scripts/install-deps.sh); each target asks for what it needs.
deps:
	@PYTHON=$(PYTHON) scripts/install-deps.sh $(DEPS)

configure: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)
	@ln -sf $(BUILD)/compile_commands.json compile_commands.json

# The product page's SimpleMLP DDP example: all GPUs with NCCL, else 2 CPU ranks with gloo.
demo: DEPS = demo
demo: build
	@scripts/install-python.sh $(PYTHON) >/dev/null
	$(BUILD)/cli/air-run --python $(PYTHON) -f configs/demo.yaml

test: build
	@scripts/install-python.sh $(PYTHON) >/dev/null
	cd $(BUILD) && ctest --output-on-failure -j 2
	AIR_RUN_BINARY=$(abspath $(BUILD))/cli/air-run $(PYTHON) -m pytest -q python/tests

unit: build
	$(BUILD)/tests/unit_tests

asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DAIR_WERROR=ON -DAIR_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug"

# libFuzzer targets (fuzz/), one per parser of outside input, built with clang
# and run FUZZ_SECONDS each from their corpus (fuzz/corpus/<target>/).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 10
fuzz: DEPS = test
fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DAIR_FUZZ=ON -DAIR_BUILD_TESTS=OFF -DAIR_WITH_CUDA=OFF -DAIR_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	scripts/run-fuzz.sh $(FUZZ_BUILD)/fuzz $(FUZZ_SECONDS)

format:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

# Fails when a file differs from `make format`'s output (clang-format 14, as on Debian 12).
format-check:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run -Werror

lint: build
	git ls-files 'core/*.cpp' 'cli/*.cpp' | xargs clang-tidy -p $(BUILD) --quiet

bench: build
	python3 scripts/bench-launch.py --air-run $(BUILD)/cli/air-run --baseline $(BUILD)/fixtures/baseline_launcher

clean:
	rm -rf build build-asan build-fuzz compile_commands.json
