# Thin wrapper over CMake; every target is one or two commands.
BUILD ?= build
CMAKE_FLAGS ?=
# A unity build (each target's files compiled in batches of 8): about half the
# CPU of a first `make build` / `make test`. UNITY=OFF compiles file by file,
# what an edit-compile loop wants (one changed file, one file compiled).
UNITY ?= ON
# The interpreter that runs the Python ranks: python3 on PATH when it has torch
# (a GPU machine's own PyTorch), else Debian's, where `make deps` puts python3-torch.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(shell python3 -c 'import torch' >/dev/null 2>&1 && command -v python3 || echo /usr/bin/python3)
endif
DEPS ?= test
JOBS ?= $(shell nproc)
# The checkout's `air` package for the demo and the tests, through PYTHONPATH:
# nothing is installed into an interpreter.
CHECKOUT_PYTHONPATH = $(CURDIR)/python$(if $(PYTHONPATH),:$(PYTHONPATH))
# `make install`: where, and an optional staging root (packagers).
PREFIX ?= /usr/local
DESTDIR ?=
# The release build behind `make package` and `make wheel`: fmt, yaml-cpp, libyaml
# and libstdc++ linked in (AIR_PORTABLE), no tests, installed under /usr.
RELEASE_BUILD ?= build-release
RELEASE_FLAGS = -DCMAKE_BUILD_TYPE=Release -DAIR_PORTABLE=ON -DAIR_BUILD_TESTS=OFF -DAIR_WITH_CUDA=OFF \
	-DCMAKE_INSTALL_PREFIX=/usr -DPython3_EXECUTABLE=/usr/bin/python3
# `make portable`: the same, built in a Debian 11 root (scripts/build-portable.sh).
PORTABLE_BUILD ?= build-portable

.PHONY: all deps configure build demo test unit e2e pytest asan fuzz fuzz-build check-includes format format-check lint bench soak clean \
	install release package wheel portable test-install test-install-packages test-install-fresh test-distros

all: build

# DEPS: build, demo or test (scripts/install-deps.sh); each target asks for what it needs.
deps:
	@PYTHON=$(PYTHON) scripts/install-deps.sh $(DEPS)

# AIR_TEST_PYTHON: the interpreter that runs pytest under ctest (tests/CMakeLists.txt).
configure: deps
	@cmake -S . -B $(BUILD) -DAIR_TEST_PYTHON=$(PYTHON) -DCMAKE_UNITY_BUILD=$(UNITY) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)
	@ln -sf $(BUILD)/compile_commands.json compile_commands.json

# The product page's SimpleMLP DDP example: all GPUs with NCCL, else 2 CPU ranks with gloo.
# Builds air-run only, in a tree of its own made for a short first wait: a
# unity build (a target's files compiled in batches of 8), no tests, -O1
# without debug information, fmt and yaml-cpp linked as shared libraries (the
# static runtime compiles fmt into every file that uses it). Less than half the
# CPU time of a file-by-file build's air-run (docs/benchmarks.md, "make demo");
# `make check-includes` fails a file that misses an include.
# An existing tree is used as it is configured: DEMO_BUILD=build takes `make build`'s.
DEMO_BUILD ?= build-demo
DEMO_FLAGS = -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON \
	-DAIR_BUILD_TESTS=OFF -DAIR_STATIC_RUNTIME=OFF
# PyTorch (hundreds of packages on a fresh Debian) installs while air-run
# compiles: the two overlap, and apt's output goes to a log shown on failure.
demo: DEPS = build
demo: deps
	@test -f $(DEMO_BUILD)/CMakeCache.txt || cmake -S . -B $(DEMO_BUILD) $(DEMO_FLAGS) $(CMAKE_FLAGS) >/dev/null
	@PYTHON=$(PYTHON) scripts/install-deps.sh python >$(DEMO_BUILD)/install-python.log 2>&1 & deps=$$!; \
	  cmake --build $(DEMO_BUILD) -j $(JOBS) --target air-run; built=$$?; \
	  wait $$deps || { cat $(DEMO_BUILD)/install-python.log; echo "make demo: installing PyTorch failed (above)" >&2; exit 1; }; \
	  exit $$built
	PYTHONPATH=$(CHECKOUT_PYTHONPATH) $(DEMO_BUILD)/cli/air-run --python $(PYTHON) -f configs/demo.yaml

# Unit, end-to-end and pytest (one entry per file), TEST_JOBS at a time: most
# of them wait (ranks that sleep, hangs that must be seen), so five at a time
# on two cores (the suite without the real Slurm: 243 s; with it, 335 s at
# four and 389 s at three). What only the tests use (PyTorch, Chromium,
# Slurm, clang: hundreds of packages on a fresh Debian) installs while the
# compiler runs; only the compiler's packages come first.
TEST_JOBS ?= 5
test: DEPS = build
test: configure
	@PYTHON=$(PYTHON) scripts/install-deps.sh test >$(BUILD)/install-test.log 2>&1 & deps=$$!; \
	  cmake --build $(BUILD) -j $(JOBS); built=$$?; \
	  wait $$deps || { cat $(BUILD)/install-test.log; echo "make test: installing the tests' packages failed (above)" >&2; exit 1; }; \
	  exit $$built
	@ln -sf $(BUILD)/compile_commands.json compile_commands.json
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS)

# air-run, air-nccl-check when built, man page, completions, the air package
# (where $(PYTHON) looks under PREFIX) and the docs; see docs/install.md.
install: DEPS = build
install: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) -DCMAKE_INSTALL_PREFIX=$(PREFIX) -DPython3_EXECUTABLE=$(PYTHON) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target air-run air-run-docs
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)

release: DEPS = package
release: deps
	@cmake -S . -B $(RELEASE_BUILD) $(RELEASE_FLAGS) >/dev/null
	@cmake --build $(RELEASE_BUILD) -j $(JOBS)

# $(RELEASE_BUILD)/air-run_<version>_<arch>.deb
package: release
	cd $(RELEASE_BUILD) && rm -f air-run_*.deb && cpack -G DEB >/dev/null && ls -l $(CURDIR)/$(RELEASE_BUILD)/air-run_*.deb

# $(PORTABLE_BUILD)/dist/air_run-<version>-py3-none-manylinux_2_31_x86_64.whl: the air package
# and the portable binary, built in a Debian 11 root (needs root), so that it runs wherever
# pip installs it: glibc 2.31 and later. scripts/build-wheel.sh refuses a binary that needs more.
wheel: DEPS = package
wheel: deps
	scripts/build-portable.sh $(PORTABLE_BUILD)
	scripts/build-wheel.sh $(PORTABLE_BUILD)/air-run $(PORTABLE_BUILD)/dist manylinux_2_31_x86_64

# The binary, .deb and wheel for Debian 11 and later, proven in a Debian 11 root (needs root).
portable: wheel
	AIR_PORTABLE_BINARY=$(PORTABLE_BUILD)/air-run AIR_PORTABLE_DEB=$$(ls $(PORTABLE_BUILD)/air-run_*.deb) \
	  AIR_SOURCE_DIR=$(CURDIR) bash tests/e2e/test_install_portable.sh
	AIR_WHEEL=$$(ls $(PORTABLE_BUILD)/dist/air_run-*.whl) AIR_RUN=$(CURDIR)/$(PORTABLE_BUILD)/air-run \
	  AIR_SOURCE_DIR=$(CURDIR) bash tests/e2e/test_install_wheel.sh

# The .deb in a fresh Debian 12 root, the wheel in a fresh venv and its binary in a Debian 11
# root, and the README's first steps in a fresh Debian 12 root (needs root). The .deb is the
# portable build's (the one a release ships, built with the wheel's binary): `make package`
# runs the same CMake configuration on this machine, so it is not built a second time here.
# test-install-packages (the .deb and the wheel) and test-install-fresh (the
# README's first steps) need nothing of each other: CI runs the second while it compiles.
test-install: test-install-packages test-install-fresh

test-install-packages: wheel
	AIR_DEB=$$(ls $(PORTABLE_BUILD)/air-run_*.deb) AIR_RUN=$(CURDIR)/$(PORTABLE_BUILD)/air-run \
	  AIR_SOURCE_DIR=$(CURDIR) bash tests/e2e/test_install_deb.sh
	AIR_WHEEL=$$(ls $(PORTABLE_BUILD)/dist/air_run-*.whl) AIR_RUN=$(CURDIR)/$(PORTABLE_BUILD)/air-run \
	  AIR_SOURCE_DIR=$(CURDIR) bash tests/e2e/test_install_wheel.sh

test-install-fresh: DEPS = package
test-install-fresh: deps
	AIR_FRESH_ROOTS_DIR=$(PORTABLE_BUILD)/roots AIR_SOURCE_DIR=$(CURDIR) bash tests/e2e/test_install_deps.sh

# The README's two commands (make demo, make test) in fresh minimal Debian 12
# and Debian 13 roots (needs root; slow, so not in CI: scripts/test-distro.sh).
DISTRO_SUITES ?= bookworm trixie
test-distros: DEPS = package
test-distros: deps
	@status=0; for suite in $(DISTRO_SUITES); do scripts/test-distro.sh $$suite $(RELEASE_BUILD)/roots || status=1; done; exit $$status

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
	@$(MAKE) --no-print-directory fuzz-build
	scripts/run-fuzz.sh $(FUZZ_BUILD)/fuzz $(FUZZ_SECONDS)

# The fuzz targets alone, built as a unity build (a target's files in batches
# of 8: about half the compile time; CI runs `make check-includes` for what
# unity batches hide). CI
# builds them while the tests run.
fuzz-build:
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD=ON \
	  -DAIR_FUZZ=ON -DAIR_BUILD_TESTS=OFF -DAIR_WITH_CUDA=OFF -DAIR_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets

# Each core/ and cli/ file compiles on its own, with -fsyntax-only (nothing
# built): CI's builds are unity builds, where a file that misses an include
# still compiles if a file batched before it has the include.
INCLUDES_BUILD ?= build-includes
check-includes:
	@cmake -S . -B $(INCLUDES_BUILD) -DAIR_BUILD_TESTS=OFF -DAIR_WITH_CUDA=OFF -DCMAKE_UNITY_BUILD=OFF >/dev/null
	python3 scripts/check-includes.py $(INCLUDES_BUILD) -j $(JOBS)

format:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format -i

# Fails when a file differs from `make format`'s output (clang-format 14, as on Debian 12).
format-check:
	git ls-files '*.cpp' '*.hpp' | xargs clang-format --dry-run -Werror

lint: build
	git ls-files 'core/*.cpp' 'cli/*.cpp' | xargs clang-tidy -p $(BUILD) --quiet

bench: build
	python3 scripts/bench-launch.py --air-run $(BUILD)/cli/air-run --baseline $(BUILD)/fixtures/baseline_launcher

# Long: 10,000 launches of 4 ranks and 1,000 of 64 (SOAK_ARGS="--sequential 500 --wide 50" for a short one).
soak: build
	python3 scripts/soak.py --air-run $(BUILD)/cli/air-run --fixtures $(BUILD)/fixtures $(SOAK_ARGS)

clean:
	rm -rf build build-asan build-fuzz $(INCLUDES_BUILD) $(DEMO_BUILD) $(RELEASE_BUILD) $(PORTABLE_BUILD) compile_commands.json
