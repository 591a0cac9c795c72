#!/usr/bin/env python3
"""Start-up cost of a cached Python environment (issue 5).

Times `air-run` starting 8 trivial ranks twice over, interleaved in one run:
once with `environment.dependencies` served from the cache, once without
dependencies, and reports the difference of the medians in milliseconds
(target: under 20 ms). Everything is offline: the dependency is a wheel
written by this script, the environment is built once before timing.

  scripts/bench-env.py [--air-run build/cli/air-run] [--runs 30] [--ranks 8] [--python PY]
"""
import argparse
import base64
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile


def make_wheel(name, version, outdir):
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VALUE = '{name}-{version}'\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: bench-env\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    digest = lambda text: "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    files[f"{info}/RECORD"] = "".join(f"{p},{digest(c)},{len(c.encode())}\n" for p, c in files.items()) + f"{info}/RECORD,,\n"
    os.makedirs(outdir, exist_ok=True)
    with zipfile.ZipFile(os.path.join(outdir, f"{name}-{version}-py3-none-any.whl"), "w") as z:
        for path, content in files.items():
            z.writestr(path, content)


def timed(cmd, env):
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        sys.exit(f"bench-env: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")
    return elapsed, done.stderr


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--air-run", default=os.environ.get("AIR_RUN", os.path.join(here, "..", "build", "cli", "air-run")))
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--python", default=sys.executable, help="base interpreter (a pyenv shim adds its own start-up)")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="air-bench-env-")
    try:
        make_wheel("benchpkg", "1.0", os.path.join(work, "wheels"))
        env = dict(os.environ, PIP_CONFIG_FILE="/dev/null")
        for name in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "AIR_RUN_FAKE_GPUS"):
            env.pop(name, None)
        common = [args.air_run, "--cpu-ranks", str(args.ranks), "--python", args.python,
                  "--env-cache-dir", os.path.join(work, "cache")]
        target = ["--no-python", "true"]
        with_deps = common + ["--no-index", "--find-links", os.path.join(work, "wheels"),
                              "-f", os.path.join(work, "job.yaml")] + target
        without = common + target
        with open(os.path.join(work, "job.yaml"), "w") as f:
            f.write("environment:\n  dependencies: [benchpkg==1.0]\n")

        _, err = timed(with_deps, env)  # builds the environment once
        if "building environment" not in err:
            sys.exit("bench-env: expected a first build, got:\n" + err)
        timed(without, env)  # warm caches for both
        a, b = [], []
        for _ in range(args.runs):
            t, err = timed(with_deps, env)
            if "using cached environment" not in err:
                sys.exit("bench-env: the environment was not reused:\n" + err)
            a.append(t)
            b.append(timed(without, env)[0])
        result = {
            "ranks": args.ranks,
            "runs": args.runs,
            "python": args.python,
            "median_ms_cached_env": round(statistics.median(a), 2),
            "median_ms_no_deps": round(statistics.median(b), 2),
            "extra_ms": round(statistics.median(a) - statistics.median(b), 2),
            "target_ms": 20,
        }
        print(json.dumps(result))
        return 0 if result["extra_ms"] < 20 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
