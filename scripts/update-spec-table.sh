#!/usr/bin/env bash
# Regenerates the spec key table in docs/spec.md (between the two markers) from
# the key table compiled into air-run.  Usage: scripts/update-spec-table.sh [AIR_RUN]
set -euo pipefail
cd "$(dirname "$0")/.."
AIR_RUN=${1:-build/cli/air-run}
table=$(mktemp)
trap 'rm -f "$table"' EXIT
"$AIR_RUN" --print-spec-table >"$table"
python3 - docs/spec.md "$table" <<'PY'
import re, sys
path, table = sys.argv[1], open(sys.argv[2]).read().strip()
text = open(path).read()
begin, end = "<!-- spec-table:begin -->", "<!-- spec-table:end -->"
if begin not in text or end not in text:
    sys.exit(f"{path}: no {begin} ... {end} markers")
new = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: begin + "\n" + table + "\n" + end, text, flags=re.S)
open(path, "w").write(new)
PY
