#!/usr/bin/env bash
# The README's two commands, `make demo` and `make test`, in a fresh minimal
# root of a Debian release with only make and git, as a new user starts:
# proves that the set-up installs everything on that release and that the
# whole suite passes there. Slow (a full build and test run per release), so
# not part of CI; `make test-distros` runs it for Debian 12 and Debian 13.
#
#   scripts/test-distro.sh SUITE DIR     e.g. scripts/test-distro.sh trixie build-roots
#
# AIR_DISTRO_COMMANDS="make demo" runs only those commands (comma-separated):
# the demo's first wait alone. Needs root (scripts/debian-root.sh). Tests the
# checkout's last commit.
# Prints each command's time and exit
# status and keeps the logs in DIR/SUITE-*.log; the root is removed at the end
# (AIR_KEEP_ROOT=1 keeps it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
suite=${1:?usage: scripts/test-distro.sh SUITE DIR}
dir=$(realpath -m "${2:?usage: scripts/test-distro.sh SUITE DIR}")
root=$dir/$suite-readme
scripts/debian-root.sh make "$suite" "$root" make git || exit 1
[[ ${AIR_KEEP_ROOT:-0} == 1 ]] || trap 'rm -rf "$root"' EXIT
# A clone, as a new user has (some tests list the sources with git): the
# committed tree, so commit what is to be tested.
git clone -q --no-hardlinks "$PWD" "$root/src" || exit 1
status=0
IFS=, read -ra commands <<<"${AIR_DISTRO_COMMANDS:-make demo,make test}"
for command in "${commands[@]}"; do
  log=$dir/$suite-${command#make }.log
  start=$SECONDS
  scripts/debian-root.sh run "$root" bash -c "cd /src && $command" >"$log" 2>&1
  rc=$?
  echo "$suite: $command: exit $rc in $((SECONDS - start)) s (log: $log)"
  tail -n 5 "$log" | sed 's/^/  /'
  ((rc == 0)) || status=1
done
exit $status
