#!/usr/bin/env bash
# `make test` on a fresh Debian 12 needs nothing that `scripts/install-deps.sh`
# does not install: every program the tests run is in a minimal Debian
# (debootstrap --variant=minbase: the Essential and required packages) or in
# install-deps.sh's list, so a test that calls curl fails here, not on the
# first machine that lacks it.
#
# The programs the tests run are the words of the test sources (tests/e2e,
# python/tests, tests/mlflow and the scripts/ they name; comments left out)
# that are programs in /usr/sbin:/usr/bin:/sbin:/bin here, less NOT_COMMANDS.
#
# a_: here, from dpkg's database: each program's package is in minbase or is
#     one that `install-deps.sh test` installs or pulls in (`test` and
#     `package` for the install tests, which `make test-install` runs).
# b_, c_: the proof on fresh roots, under `make test-install` (needs root and
#     AIR_FRESH_ROOTS_DIR): minbase Debian 12 and Debian 13 roots with only make
#     and git, as the README starts, get `scripts/install-deps.sh test`; then
#     every program is there, pytest collects python/tests, and `make configure`
#     finds every library.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/debian_root.sh"

if ! command -v dpkg-query >/dev/null || ! command -v apt-cache >/dev/null; then
  echo "skip: not a Debian system (no dpkg-query, apt-cache)"
  exit 77
fi

# Words of the test sources that are programs on this machine but that no test runs.
NOT_COMMANDS=(
  file init last node opt prove time view write zip # English words and Python names (time.sleep, zip); opt: LLVM's, next to clang
  GET HEAD POST # HTTP methods in the sources; libwww-perl's programs where chromium brought it in
)
# The sources of the install tests, which `make test-install` runs with the
# packages of `install-deps.sh package` besides.
INSTALL_SOURCES=(
  tests/e2e/test_install_deb.sh tests/e2e/test_install_portable.sh tests/e2e/debian_root.sh
  scripts/debian-root.sh scripts/build-portable.sh
)
SYSTEM_PATH=/usr/sbin:/usr/bin:/sbin:/bin

# sources_searched [install]: the files whose words are searched, relative to the checkout.
sources_searched() {
  if [[ ${1:-} == install ]]; then
    printf '%s\n' "${INSTALL_SOURCES[@]}"
    return
  fi
  local f
  (
    cd "$AIR_SOURCE_DIR" || exit 1
    for f in tests/e2e/*.sh tests/e2e/*.py python/tests/*.py tests/mlflow/*.py; do
      [[ $f == tests/e2e/test_install_deps.sh || " ${INSTALL_SOURCES[*]} " == *" $f "* ]] || echo "$f"
    done
    # The scripts the tests run (scripts/NAME in their text); install-deps.sh
    # names packages, not programs it runs.
    for f in $(cat tests/e2e/*.sh tests/e2e/*.py python/tests/*.py | grep -oE 'scripts/[A-Za-z0-9_-]+\.(sh|py)' | sort -u); do
      [[ ! -f $f || $f == scripts/install-deps.sh || " ${INSTALL_SOURCES[*]} " == *" $f "* ]] || echo "$f"
    done
  )
}

# programs_named_by [install]: one program a line, that the sources name.
programs_named_by() {
  local word
  (cd "$AIR_SOURCE_DIR" && sources_searched "$@" | xargs sed -E 's/(^|[[:space:]])#.*//') |
    grep -oE '[A-Za-z_][A-Za-z0-9_.+-]*' | sort -u | while read -r word; do
    [[ " ${NOT_COMMANDS[*]} " != *" $word "* ]] || continue
    PATH=$SYSTEM_PATH type -P "$word" >/dev/null && echo "$word"
  done
}

# packages_of PROGRAMS-FILE: "program package" lines, the Debian package that
# installed each program here ("program -" when none did). One dpkg-query for all.
packages_of() {
  local program path
  local -a paths=()
  while read -r program; do
    path=$(PATH=$SYSTEM_PATH type -P "$program")
    # Merged /usr: dpkg knows a program by the directory its package ships it
    # in; alternatives (awk, pager) by the file their link ends at.
    paths+=("$path" /usr/bin/"$program" /bin/"$program" /usr/sbin/"$program" /sbin/"$program" "$(realpath "$path")")
  done <"$1"
  dpkg-query -S "${paths[@]}" 2>/dev/null | grep -v '^diversion by' |
    sed -E 's/^([^:,]+)[^:]*: (.*)$/\2 \1/' >owners.txt
  while read -r program; do
    path=$(PATH=$SYSTEM_PATH type -P "$program")
    awk -v a="$path" -v b="/usr/bin/$program" -v c="/bin/$program" -v d="/usr/sbin/$program" \
      -v e="/sbin/$program" -v f="$(realpath "$path")" -v p="$program" '
      $1 == a || $1 == b || $1 == c || $1 == d || $1 == e || $1 == f { print p, $2; found = 1; exit }
      END { if (!found) print p, "-" }' owners.txt
  done <"$1"
}

# closure PACKAGE...: the packages and everything they depend on, as installed here.
closure() {
  apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "$@" 2>/dev/null | grep -v '^ ' | tr -d '<>' | sort -u
}

# check_programs_come_from PROGRAMS-FILE PACKAGE...: fails for each program
# whose package is neither in minbase nor in the closure of PACKAGE...
check_programs_come_from() {
  local programs=$1
  shift
  closure "$@" >closure.txt
  packages_of "$programs" >packages.txt
  local program package kind
  while read -r program package; do
    if [[ $package == - ]]; then
      fail "the tests run $program, which no Debian package installed here"
      continue
    fi
    kind=$(dpkg-query -W -f '${Essential} ${Priority}' "$package")
    [[ $kind == yes* || $kind == *" required" ]] && continue
    grep -qxF "$package" closure.txt ||
      fail "the tests run $program (package $package, $kind), which scripts/install-deps.sh does not install"
  done <packages.txt
}

test_a_every_program_the_tests_run_is_in_minbase_or_installed_by_install_deps() {
  # Under `make test-install-fresh` (AIR_FRESH_ROOTS_DIR) the host's packages may
  # still be installing (CI installs the tests' packages beside its compile):
  # the ctest entry of `make test` checks this once they are in.
  if [[ -n ${AIR_FRESH_ROOTS_DIR:-} ]]; then
    echo "  skipped here: the ctest entry (make test) checks the host's packages"
    return 0
  fi
  programs_named_by >programs.txt
  # The scan must see the programs the tests are known to run, or it proves nothing.
  local p
  for p in curl xmllint python3 pgrep zsh srun timeout script setsid mkfifo; do
    grep -qxF "$p" programs.txt || fail "the scan of the test sources missed $p"
  done
  mapfile -t test_packages < <("$AIR_SOURCE_DIR/scripts/install-deps.sh" --list test)
  check_programs_come_from programs.txt "${test_packages[@]}"
  programs_named_by install | grep -vxFf programs.txt >install-programs.txt
  # debootstrap comes with `install-deps.sh package` (make test-install): a
  # machine set up by `make test` alone has none to find.
  for p in debootstrap chroot; do
    PATH=$SYSTEM_PATH type -P "$p" >/dev/null || continue
    grep -qxF "$p" install-programs.txt || fail "the scan of the install tests missed $p"
  done
  mapfile -t package_packages < <("$AIR_SOURCE_DIR/scripts/install-deps.sh" --list package)
  check_programs_come_from install-programs.txt "${test_packages[@]}" "${package_packages[@]}"
}

if [[ -z ${AIR_FRESH_ROOTS_DIR:-} || $(id -u) != 0 ]]; then
  run_tests
  exit
fi

# Fresh roots as the README starts from: minbase, make and git, and the
# checkout. Debian 12 (oldstable) and Debian 13 (stable); AIR_FRESH_SUITES
# picks others.
# The roots are made side by side, and set up side by side below: downloads
# and one dpkg each, 3.6 min in all where one after the other took 6.5.
SUITES=(${AIR_FRESH_SUITES:-bookworm trixie})
ROOTS=()
pids=()
for suite in "${SUITES[@]}"; do
  root="$(realpath -m "$AIR_FRESH_ROOTS_DIR")/$suite-fresh"
  ROOTS+=("$root")
  (
    "$AIR_SOURCE_DIR/scripts/debian-root.sh" make "$suite" "$root" make git || exit 1
    mkdir "$root/src"
    (cd "$AIR_SOURCE_DIR" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -C "$root/src" -xf -
  ) &
  pids+=($!)
done
trap 'rm -rf "${ROOTS[@]}"' EXIT
for pid in "${pids[@]}"; do
  wait "$pid" || exit 1
done

test_b_install_deps_in_a_fresh_root_gives_every_program() {
  # A versioned interpreter name (python3.11) is this machine's release's, not every root's.
  programs_named_by | grep -vE '^python3\.[0-9]+$' >programs.txt
  local i rc_and_seconds
  for i in "${!SUITES[@]}"; do
    (
      start=$SECONDS
      "$AIR_SOURCE_DIR/scripts/debian-root.sh" run "${ROOTS[$i]}" bash -c "cd /src && scripts/install-deps.sh test" \
        >"install-$i.log" 2>&1
      echo "$? $((SECONDS - start))" >"install-$i.rc"
    ) &
  done
  wait
  for i in "${!SUITES[@]}"; do
    R=${ROOTS[$i]}
    read -r -a rc_and_seconds <"install-$i.rc"
    if [[ ${rc_and_seconds[0]} != 0 ]]; then
      fail "scripts/install-deps.sh test in a fresh ${SUITES[$i]} root exited ${rc_and_seconds[0]}: $(tail -5 "install-$i.log")"
      continue
    fi
    echo "  scripts/install-deps.sh test in a fresh ${SUITES[$i]} root: ${rc_and_seconds[1]} s (side by side)"
    in_root "for p in $(tr '\n' ' ' <programs.txt); do PATH=$SYSTEM_PATH type -P \$p >/dev/null || echo \$p; done"
    expect_eq "$out" ""
    in_root "cd /src && python3 -m pytest --collect-only -q -p no:cacheprovider python/tests | tail -n 1"
    expect_rc 0
    expect_contains "$out" "tests collected"
  done
}

# `make configure` runs install-deps.sh again (nothing left to install) and
# CMake, which finds every library and header the build and the unit tests
# need. Not `make demo` or `make build`: a compile in the roots would add
# minutes to CI for what `make test` builds anyway (`make test-distros` runs
# the README's two commands in fresh roots).
test_c_make_configure_in_the_fresh_root_finds_every_library() {
  local i
  for i in "${!SUITES[@]}"; do
    R=${ROOTS[$i]}
    in_root "cd /src && make configure BUILD=/tmp/build && grep -c '^AIR_' /tmp/build/CMakeCache.txt"
    expect_rc 0
  done
}

# AIR_FRESH_WERROR="SUITE..." (e.g. trixie): those roots' own compiler builds
# air-run and the unit tests with warnings as errors at -O2, as `make test`
# builds them (without debug information, which changes no warning), where
# g++'s flow analysis warns: Debian 13's g++ 14 warned where CI's g++ 12
# (Debian 12, sanitized, unoptimised) is quiet. A unity build (batches of 8
# files): half the CPU of a file-by-file one (526 s of a quiet 2-core machine
# for the latter), and a file with warning options of its own (cli/options.cpp)
# is left out of the batches by CMake, so keeps them. What a batch hides, a
# missing include, CI's `make check-includes` fails. Nice 19: a build beside
# it keeps the CPU.
test_d_the_roots_compiler_builds_without_a_warning() {
  local i
  for i in "${!SUITES[@]}"; do
    [[ " ${AIR_FRESH_WERROR:-} " == *" ${SUITES[$i]} "* ]] || continue
    R=${ROOTS[$i]}
    in_root "cd /src && g++ --version | head -n 1 && cmake -S . -B /tmp/werror -DAIR_WERROR=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO='-O2 -DNDEBUG' -DAIR_WITH_CUDA=OFF -DCMAKE_UNITY_BUILD=ON >/dev/null &&
      nice -n 19 cmake --build /tmp/werror -j $(nproc) --target air-run unit_tests 2>&1 | grep -E 'warning|error' | head -n 20;
      test -x /tmp/werror/cli/air-run && test -x /tmp/werror/tests/unit_tests"
    expect_rc 0
    echo "  ${SUITES[$i]}: $(head -n 1 <<<"$out"): air-run and the unit tests build with -Werror"
    [[ $rc == 0 ]] || echo "$out" | tail -n 20 | sed 's/^/    /'
  done
}

run_tests
