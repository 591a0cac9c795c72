#!/usr/bin/env bash
# Spec files against a reference YAML parser (PyYAML): every file of
# tests/specs/malformed/ is refused by both, with air-run naming the place
# PyYAML names (file:line:col, exit 2, nothing launched); every file of
# tests/specs/wellformed/ is accepted by both, with the same command read.
source "$(dirname "$0")/lib.sh"

SPECS=$AIR_SOURCE_DIR/tests/specs
if ! "$TORCH_PYTHON" -c 'import yaml' 2>/dev/null; then
  echo "skipped: no PyYAML for $TORCH_PYTHON (python3-yaml), the reference parser"
  exit 0
fi

# pyyaml FILE: prints "refused LINE:COL" or "accepted [COMMAND, ...]" as PyYAML reads FILE.
pyyaml() {
  "$TORCH_PYTHON" - "$1" <<'PY'
import sys, yaml
try:
    with open(sys.argv[1], "rb") as f:
        doc = yaml.safe_load(f)
except yaml.MarkedYAMLError as e:
    mark = e.problem_mark or e.context_mark
    print(f"refused {mark.line + 1}:{mark.column + 1}")
except yaml.reader.ReaderError as e:  # a character the reader refuses: an offset, not a mark
    data = open(sys.argv[1], "rb").read()[: e.position]
    print(f"refused {data.count(10) + 1}:{e.position - (data.rfind(10) + 1) + 1}")
except yaml.YAMLError as e:
    print(f"refused ?: {e}")
else:
    command = doc.get("command") if isinstance(doc, dict) else None
    print("accepted [" + ", ".join(str(c) for c in command) + "]" if isinstance(command, list) else "accepted")
PY
}

test_malformed_specs_are_refused_by_both_at_the_same_place() {
  local n=0 f name verdict
  for f in "$SPECS"/malformed/*.yaml; do
    name=$(basename "$f")
    verdict=$(pyyaml "$f")
    [[ $verdict == refused* ]] || fail "$name: PyYAML accepts it, so it does not belong in malformed/"
    cp "$f" "$name"
    run_air -f "$name" --dry-run
    [[ $rc == 2 ]] || fail "$name: air-run exit $rc, expected 2; stdout: $out"
    [[ $err == *"air-run: error: $name:"* ]] || fail "$name: no file:line:col in: $err"
    [[ $err == *"invalid YAML"* || $err == *"expected one YAML document"* ]] || fail "$name: not a YAML error: $err"
    [[ -z $out ]] || fail "$name: a refused spec printed a plan: $out"
    # The same place as the reference parser's: the same line, and the same
    # column or the next (PyYAML points past an unknown escape's backslash, libyaml at it).
    local place line col got
    place=${verdict#refused }
    line=${place%%:*} col=${place#*:}
    got=$(sed -n "s/^air-run: error: $name:\([0-9]*:[0-9]*\): .*/\1/p" <<<"$err")
    [[ ${got%%:*} == "$line" ]] && ((${got#*:} == col || ${got#*:} + 1 == col)) ||
      fail "$name: air-run refuses at ${got:-?}, PyYAML at $place"
    n=$((n + 1))
  done
  ((n >= 30)) || fail "only $n malformed specs"
}

test_the_unterminated_quote_keeps_no_timeout() {
  cp "$SPECS/malformed/unterminated_double_quote.yaml" job.yaml
  run_air -f job.yaml --dry-run
  expect_rc 2
  expect_eq "$err" "air-run: error: job.yaml:5:1: invalid YAML: found unexpected end of stream (while scanning a quoted scalar that starts at 3:10)"
}

test_wellformed_specs_are_accepted_by_both_alike() {
  local n=0 f name verdict line
  for f in "$SPECS"/good/*.yaml; do # resolved by the unit tests (their targets are not here)
    verdict=$(pyyaml "$f")
    [[ $verdict == accepted* ]] || fail "$(basename "$f"): PyYAML refuses it: $verdict"
  done
  for f in "$SPECS"/wellformed/*.yaml; do
    name=$(basename "$f")
    verdict=$(pyyaml "$f")
    [[ $verdict == accepted* ]] || fail "$name: PyYAML refuses it: $verdict"
    run_air -f "$f" --dry-run
    [[ $rc == 0 ]] || { fail "$name: air-run exit $rc: $err"; continue; }
    line=$(grep -m1 '^  command = ' "$TESTDIR/stdout")
    line=${line#  command = }
    expect_eq "${line%%  (*}" "${verdict#accepted }"
    n=$((n + 1))
  done
  ((n >= 15)) || fail "only $n well-formed specs"
}

run_tests
