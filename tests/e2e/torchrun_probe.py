"""Stands in for a training script: records what the launcher gave this rank.

Writes $PROBE_OUT/rank<RANK>.json with argv and the whole environment, and
prints one line per stream so output routing (--tee, --redirects,
--local-ranks-filter) can be checked. Used by tests/e2e/test_torchrun_lines.sh
and scripts/torchrun-probe-compare.sh, under air-run and under torchrun alike.
"""

import json
import os
import sys

rank = os.environ.get("RANK", "none")
out = os.environ.get("PROBE_OUT", ".")
record = {"argv0": sys.argv[0], "argv": sys.argv[1:], "env": dict(os.environ)}
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump(record, f, indent=1, sort_keys=True)
print(f"probe stdout rank {rank}", flush=True)
print(f"probe stderr rank {rank}", file=sys.stderr, flush=True)
