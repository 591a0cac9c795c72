#!/usr/bin/env bash
# Builds the air-run wheel around a built binary: the `air` package plus the
# binary as air/bin/air-run and an `air-run` command (python/setup.py). Offline,
# with Debian's setuptools and wheel (python3-setuptools, python3-wheel,
# python3-pip); nothing is written outside OUT_DIR.
#
#   scripts/build-wheel.sh BINARY OUT_DIR [PLATFORM]
# PLATFORM is the wheel's platform tag (default: this machine's, linux_x86_64);
# the binary of scripts/build-portable.sh is manylinux_2_31_x86_64 (`make wheel`).
# A manylinux_2_N tag is refused for a binary that asks for a glibc symbol
# newer than 2.N: pip would install it where it cannot start.
# PYTHON (default /usr/bin/python3) is the interpreter that builds it.
set -euo pipefail

(($# >= 2)) || { echo "usage: scripts/build-wheel.sh BINARY OUT_DIR [PLATFORM]" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
binary=$(realpath "$1")
out=$(realpath -m "$2")
python=${PYTHON:-/usr/bin/python3}
platform=${3:-}
if [[ $platform =~ ^manylinux_([0-9]+)_([0-9]+)_ ]]; then
  allowed=GLIBC_${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
  needed=$(objdump -T "$binary" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -n 1)
  if [[ $(printf '%s\n' "$needed" "$allowed" | sort -V | tail -n 1) != "$allowed" ]]; then
    echo "build-wheel: $binary needs $needed, newer than $platform allows ($allowed);" \
      "build it in an older root (scripts/build-portable.sh, make wheel)" >&2
    exit 1
  fi
fi
mkdir -p "$out"
rm -f "$out"/air_run-*.whl
# The wheel carries a stripped copy: debug sections are no use to pip users.
work=$out/.build
rm -rf "$work"
mkdir -p "$work"
cp "$binary" "$work/air-run"
strip "$work/air-run" 2>/dev/null || true
AIR_RUN_WHEEL_BINARY=$work/air-run AIR_RUN_WHEEL_PLATFORM=$platform AIR_RUN_WHEEL_BUILD_DIR=$work/setuptools \
  PIP_CONFIG_FILE=/dev/null "$python" -m pip wheel "$repo/python" --no-build-isolation --no-deps --no-index \
  --no-cache-dir --disable-pip-version-check -q -w "$out"
rm -rf "$work"
ls "$out"/air_run-*.whl
