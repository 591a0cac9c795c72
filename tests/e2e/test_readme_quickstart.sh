#!/usr/bin/env bash
# Every command of the README's quick start works verbatim: each ```sh or
# ```bash block under the "Quick start" heading (up to the next heading of the
# same or a higher level) runs as one bash script with `set -e`, as a user
# who installed air-run would run it:
#   - the built air-run first on PATH, and a python3 that has torch;
#   - the checkout's `air` package importable (as the wheel or .deb gives it);
#   - from a scratch directory that mirrors the checkout's top level (links),
#     so relative paths work and what a command writes stays out of the checkout.
# Blocks fenced otherwise (```console, ```yaml, plain ```) are not run: use
# them for build and install commands.
source "$(dirname "$0")/lib.sh"

README=${AIR_README:-$AIR_SOURCE_DIR/README.md}

# quickstart_blocks FILE: prints the runnable blocks, each ended by a NUL.
quickstart_blocks() {
  awk '
    /^#+[ \t]+[Qq]uick start[ \t]*$/ { level = index($0, " ") - 1; inside = 1; next }
    inside && !fence && /^#+[ \t]/ && index($0, " ") - 1 <= level { inside = 0 }
    inside && /^```/ {
      if (fence) { if (run) printf "%s%c", block, 0; fence = 0; run = 0; block = ""; next }
      fence = 1; run = ($0 ~ /^```(sh|bash|shell)[ \t]*$/); next
    }
    inside && fence && run { block = block $0 "\n" }
  ' "$1"
}

test_every_quickstart_block_runs() {
  local count=0 block
  mkdir bin scratch
  ln -s "$(dirname "$AIR_RUN")/air-run" bin/air-run
  ln -s "$TORCH_PYTHON" bin/python3
  local entry
  for entry in "$AIR_SOURCE_DIR"/*; do
    [[ $(basename "$entry") == build* ]] || ln -s "$entry" "scratch/$(basename "$entry")"
  done
  while IFS= read -r -d '' block; do
    count=$((count + 1))
    printf 'set -e\n%s' "$block" >"block$count.sh"
    (cd scratch && PATH="$TESTDIR/bin:$PATH" PYTHONPATH="$AIR_SOURCE_DIR/python" \
      timeout -k 5 300 bash "../block$count.sh") >"block$count.out" 2>&1 ||
      fail "quick start block $count failed (exit $?):"$'\n'"$block"$'\n'"output: $(tail -15 "block$count.out")"
  done < <(quickstart_blocks "$README")
  ((count > 0)) || fail "no \`\`\`sh block under a 'Quick start' heading in $README"
  return 0
}

test_extraction_finds_only_the_quickstart_sh_blocks() {
  cat >readme.md <<'MD'
# Tool
```sh
echo before
```
## Quick start
Text.
```sh
echo one
```
```console
$ not run
```
### A sub-heading stays inside
```bash
echo two
```
## Next section
```sh
echo after
```
MD
  local blocks
  blocks=$(quickstart_blocks readme.md | tr '\0' '|')
  expect_eq "$blocks" $'echo one\n|echo two\n|'
}

run_tests
