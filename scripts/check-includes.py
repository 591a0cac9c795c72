#!/usr/bin/env python3
"""Every source of core/ and cli/ compiles on its own: no missing include.

  scripts/check-includes.py BUILD_DIR [-j N]

CI compiles in unity batches (a target's files 8 at a time: half the CPU),
where a file that forgot an include still compiles because a file before it
in its batch included it. This check catches that at a fraction of a build's
cost: it takes BUILD_DIR's compile_commands.json (configure BUILD_DIR without
CMAKE_UNITY_BUILD; nothing needs building there) and runs each core/ and cli/
command with -fsyntax-only: the same flags and includes, no code generated.
The unit tests are left out: they compile with a precompiled header, which
hides a missing include anyway. Prints each failing file with the compiler's
first lines; exits 1 if any failed.
"""
import argparse
import concurrent.futures
import json
import os
import shlex
import subprocess
import sys
import time


def syntax_only(entry):
    """The entry's command, compiling nothing: -o and its operand dropped."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "-o":
            skip = True
        elif not arg.startswith("-o"):
            out.append(arg)
    return out + ["-fsyntax-only"]


def check(entry):
    done = subprocess.run(syntax_only(entry), cwd=entry["directory"], capture_output=True, text=True)
    return entry["file"], done.returncode, done.stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build_dir")
    parser.add_argument("-j", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    with open(os.path.join(args.build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    source_dir = os.path.dirname(os.path.abspath(os.path.dirname(__file__)))
    mine = [e for e in entries
            if os.path.relpath(e["file"], source_dir).split(os.sep)[0] in ("core", "cli")
            and "unity_" not in os.path.basename(e["file"])]
    if not mine:
        sys.exit("check-includes: no core/ or cli/ file in %s/compile_commands.json "
                 "(configure it without CMAKE_UNITY_BUILD)" % args.build_dir)
    start = time.monotonic()
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(args.j) as pool:
        for path, rc, err in pool.map(check, mine):
            if rc != 0:
                failed += 1
                print("FAIL %s\n%s" % (os.path.relpath(path, source_dir), "\n".join(err.splitlines()[:12])))
    print("check-includes: %d of %d files compile on their own (%.0f s)"
          % (len(mine) - failed, len(mine), time.monotonic() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
