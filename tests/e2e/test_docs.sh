#!/usr/bin/env bash
# docs/spec.md's key table is generated from the key table in core/spec/keys.cpp:
# this fails when a key is added or changed without regenerating it
# (scripts/update-spec-table.sh does that), and when a flag of --help is
# missing from docs/spec.md, the options reference.
source "$(dirname "$0")/lib.sh"

SPEC_DOC=$AIR_SOURCE_DIR/docs/spec.md

test_spec_doc_table_matches_key_table() {
  "$AIR_RUN" --print-spec-table >table.md
  python3 - "$SPEC_DOC" table.md <<'PY' || fail "docs/spec.md key table is stale: run scripts/update-spec-table.sh"
import sys
doc, table = open(sys.argv[1]).read(), open(sys.argv[2]).read()
sys.exit(0 if table.strip() in doc else 1)
PY
}

test_update_script_rewrites_a_stale_table() {
  # The script edits a copy of the checkout's docs/spec.md with one row dropped.
  mkdir -p copy/docs copy/scripts
  cp "$AIR_SOURCE_DIR/scripts/update-spec-table.sh" copy/scripts/
  grep -v '^| `timeout` |' "$SPEC_DOC" >copy/docs/spec.md
  expect_not_contains "$(cat copy/docs/spec.md)" '| `timeout` |'
  bash copy/scripts/update-spec-table.sh "$AIR_RUN" || fail "update-spec-table.sh failed"
  expect_eq "$(cmp copy/docs/spec.md "$SPEC_DOC" && echo same)" "same"
}

test_every_flag_in_help_is_in_the_spec_doc() {
  "$AIR_RUN" --help >help.txt
  local flag
  for flag in $(grep -oE -- '--[a-z][a-z-]+' help.txt | sort -u); do
    [[ $flag == --help ]] && continue
    grep -q -- "$flag" "$SPEC_DOC" || fail "docs/spec.md does not mention $flag"
  done
}

test_readme_links_to_existing_docs() {
  local link
  for link in $(grep -oE '\]\(docs/[^)#]+' "$AIR_SOURCE_DIR/README.md" | sed 's/^](//' | sort -u); do
    [[ -e $AIR_SOURCE_DIR/$link ]] || fail "README.md links to missing $link"
  done
  for link in spec supervision reports mlflow install torchrun python; do
    grep -q "](docs/$link.md)" "$AIR_SOURCE_DIR/README.md" || fail "README.md does not link docs/$link.md"
  done
}

run_tests
