#!/usr/bin/env bash
# Every fenced code block of README.md and docs/*.md runs as written, so that a
# broken example fails the build (tests/e2e/docs_blocks.py says how each tag is
# run). A block that cannot run on a CPU-only CI machine carries, on the line
# just above its fence, `<!-- docs-test: skip (REASON) -->`; this test prints
# every skip with its reason.
source "$(dirname "$0")/lib.sh"

BLOCKS=$AIR_SOURCE_DIR/tests/e2e/docs_blocks.py

doc_files() {
  echo "$AIR_SOURCE_DIR/README.md" "$AIR_SOURCE_DIR"/docs/*.md
}

test_every_doc_block_runs() {
  # shellcheck disable=SC2046 # one word per file
  python3 "$BLOCKS" run --air-run "$AIR_RUN" --python "$TORCH_PYTHON" --source "$AIR_SOURCE_DIR" \
    --work "$TESTDIR" $(doc_files) >report.txt 2>&1 ||
    fail "a documentation block failed:"$'\n'"$(cat report.txt)"
  expect_contains "$(cat report.txt)" "README.md:"
}

test_blocks_are_tagged_and_skips_give_a_reason() {
  cat >doc.md <<'MD'
# Doc
```sh
echo run me
```
<!-- docs-test: skip (needs GPUs) -->
```sh
nvidia-smi
```
  ```python
  print("indented, in a list")
  ```
```console
$ echo one \
    two
one two
```
<!-- docs-test: exit 3 -->
```console
$ sh -c 'exit 3'
```
```text
output only
```
```
untagged
```
<!-- docs-test: skip -->
```sh
no reason
```
MD
  local listing
  listing=$(python3 "$BLOCKS" list doc.md)
  expect_eq "$?" "1"
  expect_contains "$listing" "doc.md:2                         sh       run"
  expect_contains "$listing" "doc.md:6                         sh       skip: needs GPUs"
  expect_contains "$listing" "doc.md:9                         python   run"
  expect_contains "$listing" "doc.md:12                        console  run"
  expect_contains "$listing" "doc.md:18                        console  run"
  expect_contains "$listing" "doc.md:21                        text     shown"
  expect_contains "$listing" "doc.md:24                        -        error: untagged block"
  expect_contains "$listing" "doc.md:28                        sh       error: marker 'skip'"
}

test_a_failing_block_fails_with_its_place_and_output() {
  printf '# Doc\n```sh\necho fine\n```\n```python\nraise SystemExit("broken example")\n```\n' >doc.md
  printf '```console\n$ sh -c "exit 3"\n```\n<!-- docs-test: exit 3 -->\n```console\n$ true\n```\n' >>doc.md
  python3 "$BLOCKS" run --air-run "$AIR_RUN" --python "$TORCH_PYTHON" --work "$TESTDIR" doc.md \
    >report.txt 2>&1
  expect_eq "$?" "1"
  local report
  report=$(cat report.txt)
  expect_contains "$report" "doc.md:2 (sh): exit 0"
  expect_contains "$report" "FAIL doc.md:5: the python block ended with exit 1, expected 0"
  expect_contains "$report" "broken example"
  expect_contains "$report" "FAIL doc.md:8: the console block ended with exit 3, expected 0"
  expect_contains "$report" "FAIL doc.md:12: the console block ended with exit 0, expected 3"
  expect_not_contains "$report" "FAIL doc.md:2"
}

run_tests
