#!/usr/bin/env bash
# The README's spec key table is generated from the key table in core/spec/keys.cpp:
# this fails when a key is added or changed without regenerating it
# (scripts/update-readme-table.sh does that).
source "$(dirname "$0")/lib.sh"

test_readme_spec_table_matches_key_table() {
  "$AIR_RUN" --print-spec-table >table.md
  python3 - "$AIR_SOURCE_DIR/README.md" table.md <<'PY' || fail "README.md spec table is stale: run scripts/update-readme-table.sh"
import sys
readme, table = open(sys.argv[1]).read(), open(sys.argv[2]).read()
sys.exit(0 if table.strip() in readme else 1)
PY
}

test_every_flag_in_help_is_in_readme() {
  "$AIR_RUN" --help >help.txt
  local flag
  for flag in $(grep -oE -- '--[a-z][a-z-]+' help.txt | sort -u); do
    [[ $flag == --help ]] && continue
    grep -q -- "$flag" "$AIR_SOURCE_DIR/README.md" || fail "README.md does not mention $flag"
  done
}

run_tests
