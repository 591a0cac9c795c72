#!/usr/bin/env bash
# Builds the release air-run in a Debian 11 root, so that it needs nothing newer
# than glibc 2.31 (Debian 11, Ubuntu 20.04 and everything after), with fmt,
# yaml-cpp and libstdc++ linked in (AIR_PORTABLE). Writes to OUT (default
# build-portable/):
#   air-run                     the binary
#   air-run_<version>_amd64.deb the Debian package of the same build
#                               (Depends: libc6 only)
# The root (OUT/roots/bullseye-build, from scripts/debian-root.sh, cached as a
# tarball) is kept between runs, and so is its build directory: a second run
# rebuilds only what changed. It is a unity build (files compiled in batches:
# half the compile time), as CI's is. Debian 11 has g++ 10 and CMake 3.18;
# fmt and CLI11 are header-only here, and Debian 11's are too old, so this
# host's headers (Debian 12: fmt 9, CLI11 2.1) are copied in.
#
#   scripts/build-portable.sh [OUT]
# Needs root and debootstrap (scripts/debian-root.sh). Then
# tests/e2e/test_install_portable.sh runs the result in a Debian 11 root.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$repo/build-portable}")
root=$out/roots/bullseye-build
debian_root=$repo/scripts/debian-root.sh

for header in /usr/include/fmt/format.h /usr/include/CLI/CLI.hpp; do
  [[ -f $header ]] || { echo "build-portable: $header is missing (scripts/install-deps.sh build)" >&2; exit 1; }
done

start=$SECONDS
if [[ ! -x $root/usr/bin/g++ ]]; then
  "$debian_root" make bullseye "$root" g++ cmake make pkg-config libyaml-cpp-dev libyaml-dev nlohmann-json3-dev libcurl4-openssl-dev dpkg-dev file
fi
echo "build-portable: Debian 11 build root ready ($((SECONDS - start)) s)" >&2

# The sources as they are in the checkout (tracked and new files), with their
# times, so that make rebuilds only what changed since the last run.
mkdir -p "$root/usr/local/include"
cp -a /usr/include/fmt /usr/include/CLI "$root/usr/local/include/"
rm -rf "$root/src"
mkdir -p "$root/src"
(cd "$repo" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -C "$root/src" -xf -

start=$SECONDS
"$debian_root" run "$root" sh -c '
  set -e
  cmake -S /src -B /build -DCMAKE_BUILD_TYPE=Release -DAIR_PORTABLE=ON -DAIR_BUILD_TESTS=OFF \
    -DAIR_WITH_CUDA=OFF -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_UNITY_BUILD=ON >/build.log
  cmake --build /build -j "$(nproc)" >>/build.log 2>&1 || { tail -30 /build.log; exit 1; }
  cd /build && rm -f air-run_*.deb && cpack -G DEB >>/build.log'
echo "build-portable: built in $((SECONDS - start)) s" >&2

mkdir -p "$out"
rm -f "$out"/air-run_*.deb
cp "$root/build/cli/air-run" "$out/air-run"
strip "$out/air-run"
cp "$root"/build/air-run_*.deb "$out/"
glibc=$(objdump -T "$out/air-run" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -n 1)
echo "build-portable: $out/air-run ($(stat -c %s "$out/air-run") bytes, needs $glibc)," \
  "$(basename "$out"/air-run_*.deb) ($(stat -c %s "$out"/air-run_*.deb) bytes)" >&2
