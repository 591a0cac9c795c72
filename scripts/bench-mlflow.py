#!/usr/bin/env python3
"""What MLflow tracking adds to a launch.

Times `air-run` starting 8 trivial ranks, interleaved in one run: with
tracking against the loopback tracking server of the tests
(tests/mlflow/golden_server.py: experiment lookup, run creation, params,
final status, metrics, the summary as an artifact: 6 requests) and without
tracking. Reports the medians and their difference in milliseconds and their
ratio. Loopback only; the server stops by itself after the run.

The ranks are `--no-python true` by default: they need the run in their
environment, so the launch waits for its creation before they start.
--python-ranks makes them Python programs (a script that only checks, in a
tracked launch, that MLFLOW_RUN_ID reached it; --python picks the
interpreter, this script's own by default): they start at once and wait for
the run in air-run's start-up shim, as training ranks do.

--baseline AIR_RUN adds a third launch to each round: the tracked one with
another air-run (an earlier build), so a before/after comparison shares the
same moments of a busy machine.

--delay-ms holds every answer of the server back that long, as a real
server's database commit does (a real MLflow 2.17 server with a SQLite store
took about 25 ms per request): then the difference counts the round trips a
launch waits for. Target: under 50 ms with --delay-ms 25.

  scripts/bench-mlflow.py [--air-run build/cli/air-run] [--runs 30] [--ranks 8] [--delay-ms 25]
                          [--no-experiment] [--python-ranks [--python /usr/bin/python3]]
                          [--baseline OLD_AIR_RUN]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from benchlib import run_timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--air-run", default=os.path.join(ROOT, "build", "cli", "air-run"))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--delay-ms", type=int, default=0, help="the server's time per answer")
    ap.add_argument("--no-experiment", action="store_true",
                    help="the Default experiment: no experiment lookup before the run")
    ap.add_argument("--python-ranks", action="store_true",
                    help="trivial Python ranks instead of `--no-python true`")
    # The interpreter itself, not a wrapper such as pyenv's shim (a second of bash per rank).
    ap.add_argument("--python", default=sys.executable, help="the Python ranks' interpreter")
    ap.add_argument("--baseline", help="another air-run: its tracked launch joins each round")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="air-bench-mlflow-") as tmp:
        port_file = os.path.join(tmp, "port")
        server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "mlflow", "golden_server.py"),
                                   "--port-file", port_file, "--lifetime", str(60 + args.runs * 2),
                                   "--delay-ms", str(args.delay_ms)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60
            while not os.path.exists(port_file) and time.time() < deadline:
                time.sleep(0.02)
            uri = "http://127.0.0.1:" + open(port_file).read()
            env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "AIR_RUN_"))}
            base = [args.air_run, "--accelerator-type", "CPU", "--cpu-ranks", str(args.ranks)]
            expect_run = []
            if args.python_ranks:
                script = os.path.join(tmp, "rank.py")
                with open(script, "w") as f:
                    f.write("import os, sys\n"
                            "sys.exit(3 if os.environ.get('BENCH_EXPECT_RUN') and "
                            "not os.environ.get('MLFLOW_RUN_ID') else 0)\n")
                base += ["--python", args.python, script]
                expect_run = ["--env", "BENCH_EXPECT_RUN=1"]
            else:
                base += ["--no-python", "true"]
            experiment = [] if args.no_experiment else ["--mlflow-experiment", "bench"]
            tracked = [args.air_run, "--mlflow-tracking-uri", uri] + experiment + expect_run + base[1:]
            launches = {"without tracking": base, "with tracking": tracked}
            if args.baseline:
                launches["baseline, tracked"] = [args.baseline] + tracked[1:]
            for cmd in launches.values():  # warm-up: page cache, the experiment exists afterwards
                run_timed(cmd, env)
            times = {name: [] for name in launches}
            for _ in range(args.runs):
                for name, cmd in launches.items():
                    t, code = run_timed(cmd, env)
                    assert code == 0, name + ": the launch failed"
                    times[name].append(t)
        finally:
            server.kill()
            server.wait()
    medians = {name: statistics.median(t) for name, t in times.items()}
    plain = medians["without tracking"]
    ranks = "Python ranks" if args.python_ranks else "ranks (--no-python true)"
    print(f"{args.ranks} {ranks}, {args.runs} runs each, interleaved; server answers after {args.delay_ms} ms"
          f"{'' if args.no_experiment else ', experiment by name'}; load average {os.getloadavg()[0]:.2f}")
    for name, median in medians.items():
        print(f"{name + ':':18} {median * 1000:.2f} ms (median)")
    for name in [n for n in medians if n != "without tracking"]:
        label = "tracking adds" if name == "with tracking" else "the baseline's adds"
        print(f"{label} {1000 * (medians[name] - plain):+.2f} ms ({medians[name] / plain:.2f}x)")


if __name__ == "__main__":
    main()
