#!/usr/bin/env bash
# Installs what air-run needs from the distribution's archive, skipping every
# package that is already installed. Safe to re-run.
#   scripts/install-deps.sh build      compiler and libraries
#   scripts/install-deps.sh demo       build + python
#   scripts/install-deps.sh python     PyTorch and cloudpickle, unless $PYTHON has them
#                                      (`make demo` installs them while air-run compiles)
#   scripts/install-deps.sh [test]     everything the test suite uses (the default)
#   scripts/install-deps.sh package    build + what `make package`, `make wheel`,
#                                      `make portable` and `make test-install` use
#   scripts/install-deps.sh --list WHAT   prints WHAT's packages, one a line, and
#                                      installs nothing (tests/e2e/test_install_deps.sh)
#   AIR_SKIP_DEPS=1 make ...           skip this step entirely (e.g. non-Debian hosts)
#
# Tested on Debian 12 and 13 (fresh minimal roots, `make test-install`) and
# Ubuntu 24.04 (the GPU machine); Ubuntu 22.04 by its package names. Every
# name is the distribution's own unversioned one (catch2 is v2 on Debian 12 and
# v3 elsewhere; clang and its libFuzzer runtime are the default version);
# where a name differs between releases, pick() takes the first one the
# archive has. On another Debian-like system it says so and tries the same
# names; elsewhere it lists the packages and installs nothing.
set -euo pipefail

list_only=0
if [[ ${1:-} == --list ]]; then
  list_only=1
  shift
fi
if [[ "${AIR_SKIP_DEPS:-0}" == 1 && $list_only == 0 ]]; then exit 0; fi

sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

# The distribution, from os-release: "debian 12", "ubuntu 24.04", ...
distribution() {
  local ID="" VERSION_ID=""
  # shellcheck disable=SC1091
  [[ -r /etc/os-release ]] && . /etc/os-release
  echo "${ID:-unknown} ${VERSION_ID:-}"
}

# A fresh image has no package lists: without them apt-cache knows no
# package and pick() could not choose. Refreshed once, only when empty.
have_lists=unknown
ensure_lists() {
  [[ $have_lists == unknown ]] || return 0
  have_lists=yes
  command -v apt-cache >/dev/null || return 0
  apt-cache show --no-all-versions make >/dev/null 2>&1 && return 0
  ((list_only)) && return 0 # --list installs nothing and changes nothing
  echo "install-deps: no package lists yet: apt-get update" >&2
  $sudo apt-get update >&2 || true
}

# pick NAME...: the first name the archive has (the distributions name some
# packages differently); the first name when apt-cache cannot tell.
pick() {
  ensure_lists
  local name
  if command -v apt-cache >/dev/null; then
    for name in "$@"; do
      if [[ -n $(apt-cache show --no-all-versions "$name" 2>/dev/null | head -n 1) ]]; then
        echo "$name"
        return
      fi
    done
  fi
  echo "$1"
}

# The default clang's major version (19 on Debian 13, 14 on Debian 12), from
# the archive's `clang` package: libFuzzer's runtime is named after it where
# no unversioned name exists (Ubuntu 22.04 ships it in libclang-common-N-dev).
clang_major() {
  local v
  v=$(apt-cache show --no-all-versions clang 2>/dev/null | sed -n 's/^Version: \(1:\)\?\([0-9]*\).*/\2/p' | head -n 1)
  echo "${v:-14}"
}

what=${1:-test}
packages=(
  g++ cmake make pkg-config           # toolchain
  libcli11-dev                        # command line parsing
  libyaml-cpp-dev                     # spec files, with line/column marks for errors
  libyaml-dev                         # spec files: the strict syntax check (yaml-cpp accepts malformed YAML)
  libfmt-dev                          # formatting
  nlohmann-json3-dev                  # summary, result and error files
  libcurl4-openssl-dev                # MLflow tracking: REST over HTTP(S) (core/mlflow/ only)
  catch2                              # unit tests (v2 on Debian 12, v3 elsewhere); CMake builds them by default
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
  demo | python)
    [[ $what == python ]] && packages=()
    # A GPU machine usually has its own PyTorch (a venv, a container's): use it.
    if ! "${PYTHON:-/usr/bin/python3}" -c 'import torch' >/dev/null 2>&1; then
      packages+=(python3 python3-torch)
    fi
    # @distributed sends a function defined in __main__ (a notebook's, the
    # product page's example) by value: cloudpickle.
    if ! "${PYTHON:-/usr/bin/python3}" -c 'import cloudpickle' >/dev/null 2>&1; then
      packages+=(python3-cloudpickle)
    fi
    ;;
  test)
    packages+=(
      libxml2-utils                   # xmllint: validates the JUnit report in tests
      clang-format clang-tidy         # make format / make lint
      pyflakes3                       # lints the ranks' Python (tests/e2e/test_python_lint.sh)
      clang "$(pick libclang-rt-dev "libclang-rt-$(clang_major)-dev" "libclang-common-$(clang_major)-dev")" # make fuzz: clang++ -fsanitize=fuzzer (libFuzzer)
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
      iproute2                        # ip: the real Slurm test's nodes get a network namespace each
      chromium                        # headless: loads the run's HTML page (tests/e2e/test_html_browser.sh)
    )
    ;;
  *) echo "usage: scripts/install-deps.sh [--list] [build|demo|python|test|package]" >&2; exit 2 ;;
esac
if ((list_only)); then
  printf '%s\n' "${packages[@]}"
  exit 0
fi
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: $(distribution) is not Debian-like (no dpkg, apt-get): installing nothing." >&2
  echo "install-deps: install these or your distribution's equivalents, then run make with AIR_SKIP_DEPS=1:" >&2
  echo "  ${packages[*]}" >&2
  exit 0
fi
case $(distribution) in
  "debian 12" | "debian 13" | "ubuntu 22.04" | "ubuntu 24.04") ;;
  *)
    echo "install-deps: $(distribution) is not a tested distribution (Debian 12 and 13, Ubuntu 22.04 and 24.04):" >&2
    echo "install-deps: trying the same package names; set AIR_SKIP_DEPS=1 to install them yourself" >&2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then exit 0; fi

ensure_lists
# A name the archive does not have is named, not left to apt's "Unable to locate".
absent=()
for p in "${missing[@]}"; do
  [[ -n $(apt-cache show --no-all-versions "$p" 2>/dev/null | head -n 1) ]] || absent+=("$p")
done
if ((${#absent[@]} > 0)); then
  echo "install-deps: not in $(distribution)'s archive as configured: ${absent[*]}" >&2
  [[ $(distribution) == ubuntu* ]] && echo "install-deps: on Ubuntu, enable the universe component (add-apt-repository universe)" >&2
fi

echo "install-deps: installing ${missing[*]}" >&2
# Stale package lists fail the install: refresh them once and try again.
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}"; then
  $sudo apt-get update
  $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi
