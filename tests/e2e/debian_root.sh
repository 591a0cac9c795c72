# Shared by the install tests that run commands in a throwaway Debian root
# (scripts/debian-root.sh). Source after lib.sh.

# use_debian_root SUITE DIR [PACKAGE...]: makes (or unpacks the cached) root in
# DIR, sets $R, and removes the root when the test script exits.
use_debian_root() {
  R=$2
  "$AIR_SOURCE_DIR/scripts/debian-root.sh" make "$@" || exit 1
  trap 'rm -rf "$R"' EXIT
}

# in_root COMMAND-LINE: runs it with bash inside $R; sets $out, $err and $rc.
in_root() {
  "$AIR_SOURCE_DIR/scripts/debian-root.sh" run "$R" bash -c "$1" >"$TESTDIR/stdout" 2>"$TESTDIR/stderr"
  rc=$?
  out=$(cat "$TESTDIR/stdout")
  err=$(cat "$TESTDIR/stderr")
}
