#!/usr/bin/env bash
# Regenerates the spec key table in README.md (between the two markers) from
# the key table compiled into air-run.  Usage: scripts/update-readme-table.sh [AIR_RUN]
set -euo pipefail
cd "$(dirname "$0")/.."
AIR_RUN=${1:-build/cli/air-run}
"$AIR_RUN" --print-spec-table >/tmp/air-spec-table.md
python3 - README.md /tmp/air-spec-table.md <<'PY'
import re, sys
path, table = sys.argv[1], open(sys.argv[2]).read().strip()
text = open(path).read()
begin, end = "<!-- spec-table:begin -->", "<!-- spec-table:end -->"
new = re.sub(re.escape(begin) + ".*?" + re.escape(end), begin + "\n" + table + "\n" + end, text, flags=re.S)
open(path, "w").write(new)
PY
