#!/usr/bin/env python3
"""Runs every fenced code block of README.md and docs/*.md, so that a broken
example fails the build.

    docs_blocks.py list FILE...            # what would run, and every skip with its reason
    docs_blocks.py run --air-run BIN --python PY --source DIR --work DIR FILE...

Each block says how it is treated by its fence's language tag:

  python                a script, run by PY with the checkout's `air` package
  sh, bash, shell       a bash script, run with `set -e`
  console               a transcript: the lines after `$ ` are the commands
                        (with their `\\` continuation lines), run as one bash
                        script with `set -e`; the other lines are output
  json                  parsed, not run
  text, yaml, toml, ini shown, not run

A block without a tag is an error: tag it (`text` for output, a diagram or a
synopsis). An HTML comment on the line just above the fence changes how one
block is treated:

  <!-- docs-test: skip (REASON) -->   not run; REASON says why it cannot run
                                      on a CPU-only CI machine (GPUs, sudo,
                                      Slurm, a second node, minutes of build)
  <!-- docs-test: exit N -->          the block must end with exit code N

Every runnable block runs alone, in a fresh scratch directory that mirrors the
checkout's top level (links, build trees left out), so relative paths such as
configs/demo.yaml work and what a block writes stays out of the checkout.
There PATH starts with air-run and a `python3` / `python` that has torch,
PYTHONPATH holds the checkout's python/ directory, HOME is a scratch
directory, and `train.py` is a small stand-in training script (every rank
prints its rank and the world size), so lines such as `air-run --cpu-ranks 4
train.py` run as written.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

RUN_LANGS = {"python", "sh", "bash", "shell", "console"}
SHOWN_LANGS = {"json", "text", "yaml", "toml", "ini"}
MARKER = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
SKIP = re.compile(r"^skip\s*\((.+)\)$")
EXIT = re.compile(r"^exit\s+(\d+)$")
BLOCK_TIMEOUT_S = 300  # generous: on a loaded machine a torch import alone takes a minute

STAND_IN_TRAIN_PY = '''\
"""Stand-in for the user's training script in documentation examples."""
import os
import sys
print("rank %s of %s: train.py %s" % (os.environ.get("RANK"), os.environ.get("WORLD_SIZE"),
                                      " ".join(sys.argv[1:])))
'''


class Block:
    """One fenced block: where it is, its tag and text, and what its marker says."""

    def __init__(self, path, line, lang, text, skip=None, exit_code=0, error=None):
        self.path = path
        self.line = line  # 1-based line of the opening fence
        self.lang = lang
        self.text = text
        self.skip = skip  # the reason, when marked skip
        self.exit_code = exit_code
        self.error = error  # a mistake in the block's tag or marker

    def where(self):
        return "%s:%d" % (self.path, self.line)

    def runnable(self):
        return self.error is None and self.skip is None and self.lang in RUN_LANGS


def extract(path, display=None):
    """The fenced blocks of one Markdown file, in order."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    display = display or path
    blocks = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^( *)(```+|~~~+)\s*([^\s`]*)", lines[i])
        if not fence:
            i += 1
            continue
        indent, opener, lang = len(fence.group(1)), fence.group(2), fence.group(3).lower()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].lstrip(" ").startswith(opener):
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line)
            i += 1
        i += 1  # past the closing fence
        block = Block(display, start + 1, lang, "\n".join(body) + "\n")
        _read_marker(block, lines, start)
        if block.error is None:
            if not lang:
                block.error = ("untagged block: tag it (```text for output or a synopsis, "
                               "```sh / ```python to run it, with a docs-test: skip marker "
                               "when it cannot run in CI)")
            elif lang not in RUN_LANGS and lang not in SHOWN_LANGS:
                block.error = "unknown tag %r: use one of %s" % (
                    lang, ", ".join(sorted(RUN_LANGS | SHOWN_LANGS)))
            elif lang == "console" and block.skip is None and not _console_commands(block.text):
                block.error = "a console block without a `$ ` command line: tag it sh or text"
        blocks.append(block)
    return blocks


def _read_marker(block, lines, fence_index):
    above = fence_index - 1
    if above < 0:
        return
    match = MARKER.match(lines[above].strip())
    if not match:
        return
    words = match.group(1)
    skip, code = SKIP.match(words), EXIT.match(words)
    if skip:
        block.skip = skip.group(1).strip()
    elif code:
        block.exit_code = int(code.group(1))
    else:
        block.error = ("marker %r: write `docs-test: skip (REASON)` or `docs-test: exit N`"
                       % words)


def _console_commands(text):
    """The commands of a transcript: `$ ` lines and their continuations."""
    commands, continuing = [], False
    for line in text.split("\n"):
        if continuing:
            commands.append(line)
        elif line.startswith("$ "):
            commands.append(line[2:])
        else:
            continue
        continuing = line.rstrip().endswith("\\")
    return "\n".join(commands) + "\n" if commands else ""


def script_of(block):
    """(interpreter kind, script text) of a runnable block."""
    if block.lang == "python":
        return "python", block.text
    if block.lang == "console":
        return "bash", "set -e\n" + _console_commands(block.text)
    return "bash", "set -e\n" + block.text


def make_scratch(work, index, source, air_run, python):
    """A fresh directory mirroring the checkout, with bin/ and home/ beside it."""
    root = os.path.join(work, "block%d" % index)
    scratch = os.path.join(root, "scratch")
    bindir = os.path.join(root, "bin")
    home = os.path.join(root, "home")
    for d in (scratch, bindir, home):
        os.makedirs(d)
    for name in os.listdir(source):
        if name.startswith("build") or name == ".git":
            continue
        os.symlink(os.path.join(source, name), os.path.join(scratch, name))
    with open(os.path.join(scratch, "train.py"), "w") as f:
        f.write(STAND_IN_TRAIN_PY)
    os.symlink(os.path.abspath(air_run), os.path.join(bindir, "air-run"))
    for name in ("python3", "python"):
        os.symlink(python, os.path.join(bindir, name))
    return root, scratch, bindir, home


def run_block(block, index, args):
    root, scratch, bindir, home = make_scratch(args.work, index, args.source, args.air_run,
                                               args.python)
    kind, text = script_of(block)
    script = os.path.join(root, "block.py" if kind == "python" else "block.sh")
    with open(script, "w") as f:
        f.write(text)
    env = dict(os.environ)
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                 "CUDA_VISIBLE_DEVICES", "AIR_RUN_FAKE_GPUS"):
        # An empty AIR_RUN_FAKE_GPUS is tests/e2e/lib.sh's "show no GPU" on a
        # machine that has some: the blocks are written for a CPU machine.
        if name != "AIR_RUN_FAKE_GPUS" or env.get(name) != "":
            env.pop(name, None)
    env.update(PATH=bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin"),
               PYTHONPATH=os.path.join(args.source, "python"), HOME=home,
               AIR_RUN_BINARY=os.path.abspath(args.air_run))
    argv = [args.python, script] if kind == "python" else ["bash", script]
    started = time.time()
    try:
        proc = subprocess.run(argv, cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=BLOCK_TIMEOUT_S)
        code, output = proc.returncode, proc.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        code = "timeout after %d s" % BLOCK_TIMEOUT_S
        output = (e.stdout or b"").decode("utf-8", "replace")
    return code, output, time.time() - started


def collect(files, source):
    blocks = []
    for path in files:
        inside = source and os.path.abspath(path).startswith(os.path.abspath(source) + os.sep)
        display = os.path.relpath(path, source) if inside else path
        blocks += extract(path, display)
    return blocks


def check_json(block):
    try:
        json.loads(block.text)
        return None
    except ValueError as e:
        return "not valid JSON: %s" % e


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["list", "run"])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--air-run")
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), help="the checkout (default: this file's)")
    parser.add_argument("--work")
    parser.add_argument("--only", help="run only blocks whose FILE:LINE contains this")
    parser.add_argument("--jobs", type=int, default=4, help="blocks run at once (default 4)")
    args = parser.parse_args(argv)

    blocks = collect(args.files, args.source)
    problems = ["%s: %s" % (b.where(), b.error) for b in blocks if b.error]
    problems += ["%s: %s" % (b.where(), check_json(b)) for b in blocks
                 if b.lang == "json" and b.skip is None and not b.error and check_json(b)]
    skipped = [b for b in blocks if b.skip is not None and not b.error]
    if args.command == "list":
        for b in blocks:
            state = ("error: " + b.error if b.error else "skip: " + b.skip if b.skip is not None
                     else "run" if b.runnable() else "shown")
            print("%-32s %-8s %s" % (b.where(), b.lang or "-", state))
        return 1 if problems else 0

    chosen = [(index, block) for index, block in enumerate(blocks)
              if block.runnable() and not (args.only and args.only not in block.where())]
    # Blocks are independent (each has its own scratch directory); most of
    # their time is interpreter start-up and torch imports, so a few at once.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(lambda item: run_block(item[1], item[0], args), chosen))
    ran = len(chosen)
    for (index, block), (code, output, seconds) in zip(chosen, outcomes):
        print("%s (%s): exit %s in %.1fs" % (block.where(), block.lang, code, seconds))
        if code != block.exit_code:
            tail = "\n".join(output.rstrip("\n").split("\n")[-25:])
            problems.append("%s: the %s block ended with exit %s, expected %d\n--- block:\n%s"
                            "--- its output (last lines):\n%s"
                            % (block.where(), block.lang, code, block.exit_code, block.text,
                               tail))
    print("ran %d blocks; %d skipped:" % (ran, len(skipped)))
    for b in skipped:
        print("  %s: %s" % (b.where(), b.skip))
    for problem in problems:
        print("FAIL " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
