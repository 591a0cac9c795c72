#!/usr/bin/env bash
# Installs what air-run needs, from Debian's archive, skipping every package
# that is already installed. Safe to re-run.
#   scripts/install-deps.sh build      compiler and libraries
#   scripts/install-deps.sh demo       build + PyTorch, unless $PYTHON already has torch
#   scripts/install-deps.sh [test]     everything the test suite uses (the default)
#   scripts/install-deps.sh package    build + what `make package`, `make wheel`,
#                                      `make portable` and `make test-install` use
#   scripts/install-deps.sh --list WHAT   prints WHAT's packages, one a line, and
#                                      installs nothing (tests/e2e/test_install_deps.sh)
#   AIR_SKIP_DEPS=1 make ...           skip this step entirely (e.g. non-Debian hosts)
set -euo pipefail

list_only=0
if [[ ${1:-} == --list ]]; then
  list_only=1
  shift
fi
if [[ "${AIR_SKIP_DEPS:-0}" == 1 && $list_only == 0 ]]; then exit 0; fi

what=${1:-test}
packages=(
  g++ cmake make pkg-config           # toolchain
  libcli11-dev                        # command line parsing
  libyaml-cpp-dev                     # spec files, with line/column marks for errors
  libyaml-dev                         # spec files: the strict syntax check (yaml-cpp accepts malformed YAML)
  libfmt-dev                          # formatting
  nlohmann-json3-dev                  # summary, result and error files
  libcurl4-openssl-dev                # MLflow tracking: REST over HTTP(S) (core/mlflow/ only)
  catch2                              # unit tests (v2 on Debian 12); CMake builds them by default
)
case $what in
  build) ;;
  package)
    packages+=(
      dpkg-dev file                   # CPack's .deb: dpkg-shlibdeps computes Depends
      python3 python3-setuptools python3-wheel python3-pip python3-venv # the wheel, built offline
      debootstrap                     # throwaway Debian roots for the install tests
    )
    ;;
  demo)
    # A GPU machine usually has its own PyTorch (a venv, a container's): use it.
    if ! "${PYTHON:-/usr/bin/python3}" -c 'import torch' >/dev/null 2>&1; then
      packages+=(python3 python3-torch)
    fi
    ;;
  test)
    packages+=(
      libxml2-utils                   # xmllint: validates the JUnit report in tests
      clang-format clang-tidy         # make format / make lint
      clang libclang-rt-14-dev        # make fuzz: clang++ -fsanitize=fuzzer (libFuzzer)
      python3 python3-torch python3-pytest python3-cloudpickle python3-venv python3-pip
      python3-setuptools python3-wheel  # tests/e2e/test_install_wheel.sh builds the wheel
      python3-jsonschema              # validates the JSON summary against docs/summary.schema.json
      python3-fsspec                  # air.data reads URLs through fsspec (tested with memory://)
      python3-yaml                    # PyYAML: the reference parser the malformed-spec corpus is checked against
      procps                          # ps, pgrep and pkill for the end-to-end tests
      curl                            # the MLflow test calls the REST API of its tracking server
      man-db                          # renders the generated man page (man -l)
      git                             # the layering test lists the sources (git ls-files)
      zsh                             # checks the generated zsh completion parses
      slurm-wlm munge                 # real Slurm for the multi-node end-to-end test
    )
    ;;
  *) echo "usage: scripts/install-deps.sh [--list] [build|demo|test|package]" >&2; exit 2 ;;
esac
if ((list_only)); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps: not a Debian-like system; install the packages listed in README.md yourself" >&2
  exit 0
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then exit 0; fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
# A fresh image has no package lists; refresh them once when the install fails for that reason.
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
