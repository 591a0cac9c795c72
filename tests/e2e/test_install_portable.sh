#!/usr/bin/env bash
# The release binary of scripts/build-portable.sh runs unchanged where people
# train: it asks for nothing newer than glibc 2.31, links nothing but glibc,
# and runs --version, --list-gpus and a 2-rank CPU job in a minimal Debian 11
# root (no compiler, no libraries added) and here (Debian 12). Its .deb
# installs on Debian 11 too.
#
# The tests run in order (a_ to d_) on one root.
# AIR_PORTABLE_BINARY names the binary (`make portable` sets it, and
# AIR_PORTABLE_DEB); without it, or without root, the test is skipped (77).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/debian_root.sh"

if [[ -z ${AIR_PORTABLE_BINARY:-} || $(id -u) != 0 ]]; then
  echo "skip: needs AIR_PORTABLE_BINARY=<path of the portable air-run> and root (make portable)"
  exit 77
fi
BIN=$(realpath "$AIR_PORTABLE_BINARY")
DEB=${AIR_PORTABLE_DEB:+$(realpath "$AIR_PORTABLE_DEB")}
ROOTS=${AIR_ROOTS_DIR:-$(dirname "$BIN")/roots}
use_debian_root bullseye "$ROOTS/bullseye-run"
cp "$BIN" "$R/usr/local/bin/air-run"

test_a_needs_glibc_2_31_at_most_and_nothing_else() {
  local newest
  newest=$(objdump -T "$BIN" | grep -oE 'GLIBC_[0-9.]+' | sort -uV | tail -n 1)
  [[ $(printf '%s\n' "$newest" GLIBC_2.31 | sort -V | tail -n 1) == GLIBC_2.31 ]] ||
    fail "needs $newest, newer than Debian 11's glibc 2.31"
  local needed
  needed=$(objdump -p "$BIN" | awk '/NEEDED/ { print $2 }' | sort | tr '\n' ' ')
  [[ $needed =~ ^(ld-linux-x86-64\.so\.2 |libc\.so\.6 |libdl\.so\.2 |libm\.so\.6 |libpthread\.so\.0 )+$ ]] ||
    fail "links more than glibc: $needed"
}

test_b_runs_in_debian_11() {
  in_root "cat /etc/debian_version; ldd --version | head -n 1"
  expect_contains "$out" "11."
  expect_contains "$out" "2.31"
  in_root "air-run --version"
  expect_rc 0
  expect_eq "$out" "air-run 0.1.0"
  in_root "air-run --list-gpus --json"
  expect_rc 0
  expect_contains "$out" '"accelerator_type": "CPU"'
  in_root "air-run --cpu-ranks 2 --no-python sh -c 'echo rank \$RANK of \$WORLD_SIZE'"
  expect_rc 0
  expect_contains "$out" "rank 0 of 2"
  expect_contains "$out" "rank 1 of 2"
  expect_contains "$err" "2 ranks exited 0"
}

test_c_runs_here() {
  AIR_RUN=$BIN run_air --cpu-ranks 2 --no-python sh -c 'echo rank $RANK of $WORLD_SIZE'
  expect_rc 0
  expect_contains "$out" "rank 1 of 2"
}

test_d_deb_installs_in_debian_11() {
  [[ -n $DEB ]] || { echo "skip: no AIR_PORTABLE_DEB"; return 0; }
  [[ $(dpkg-deb -f "$DEB" Depends) =~ ^libc6\ \(\>=\ 2\.[0-9]+\)$ ]] || fail "Depends: $(dpkg-deb -f "$DEB" Depends)"
  cp "$DEB" "$R/tmp/"
  in_root "rm /usr/local/bin/air-run && apt-get install -y /tmp/$(basename "$DEB") && air-run --version"
  expect_rc 0
  expect_contains "$out" "air-run 0.1.0"
}

run_tests
