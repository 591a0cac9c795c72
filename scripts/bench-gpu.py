#!/usr/bin/env python3
"""GPU side of the benchmark: air-run against torchrun on the same GPUs, in one run.

  scripts/bench-gpu.py [--air-run build/cli/air-run] [--torchrun torchrun] [--python python3] [--json out.json]

For each launcher: wall time of the product page's example (configs/examples/simple_mlp_ddp.py,
every GPU, NCCL), the launcher process's own peak RSS (VmHWM, polled while it runs), and the
256 MiB NCCL all-reduce bus bandwidth measured inside ranks it launched
(scripts/torch-allreduce-bench.py). The launcher must not get in the way: the bandwidths should match.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time


def launcher_peak_rss_kb(pid, stop, box):
    """Polls /proc/PID/status for VmHWM (the launcher's own high-water mark, children excluded)."""
    while not stop.is_set():
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        box[0] = max(box[0], int(line.split()[1]))
        except OSError:
            return
        time.sleep(0.02)


def run(cmd, env=None):
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    stop, box = threading.Event(), [0]
    poller = threading.Thread(target=launcher_peak_rss_kb, args=(proc.pid, stop, box), daemon=True)
    poller.start()
    out, _ = proc.communicate()
    stop.set()
    poller.join()
    return time.perf_counter() - start, proc.returncode, box[0], out


def bench_json(out):
    for line in out.splitlines():
        i = line.find('{"tool": "torch-allreduce-bench"')
        if i >= 0:
            return json.loads(line[i:])
    return None


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default=os.path.join(root, "build/cli/air-run"))
    ap.add_argument("--torchrun", default="torchrun")
    ap.add_argument("--python", default="python3")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import torch  # noqa: the interpreter running this must be the one with torch

    ngpu = torch.cuda.device_count()
    example = [os.path.join(root, "configs/examples/simple_mlp_ddp.py"), "--epochs", "3"]
    allreduce = [os.path.join(root, "scripts/torch-allreduce-bench.py")]
    launchers = {
        "air-run": lambda target: [args.air_run, "--python", args.python, "--grace-period", "10s"] + target,
        "torchrun": lambda target: [args.torchrun, "--standalone", f"--nproc-per-node={ngpu}"] + target,
    }
    rows = {}
    for name, make in launchers.items():
        walls, rss = [], []
        for _ in range(args.repeat):
            wall, code, peak, out = run(make(example))
            if code != 0:
                print(f"{name}: example failed ({code}):\n{out[-2000:]}", file=sys.stderr)
            walls.append(wall)
            rss.append(peak)
        _, code, _, out = run(make(allreduce))
        data = bench_json(out)
        busbw = data["results"][-1]["busbw_gbps"] if data else None
        rows[name] = {"example_wall_s": statistics.median(walls), "launcher_peak_rss_kb": max(rss),
                      "allreduce_256mib_busbw_gbps": busbw, "gpus": ngpu}
    a, t = rows["air-run"], rows["torchrun"]
    print(f"{'':34} {'air-run':>10} {'torchrun':>10} {'torchrun/air-run':>17}")
    print(f"{'example wall time (s)':34} {a['example_wall_s']:>10.2f} {t['example_wall_s']:>10.2f} "
          f"{t['example_wall_s'] / a['example_wall_s']:>17.2f}")
    print(f"{'launcher peak RSS (MiB)':34} {a['launcher_peak_rss_kb'] / 1024:>10.1f} "
          f"{t['launcher_peak_rss_kb'] / 1024:>10.1f} {t['launcher_peak_rss_kb'] / max(1, a['launcher_peak_rss_kb']):>17.1f}")
    if a["allreduce_256mib_busbw_gbps"] and t["allreduce_256mib_busbw_gbps"]:
        print(f"{'256 MiB all-reduce busbw (GB/s)':34} {a['allreduce_256mib_busbw_gbps']:>10.1f} "
              f"{t['allreduce_256mib_busbw_gbps']:>10.1f} "
              f"{t['allreduce_256mib_busbw_gbps'] / a['allreduce_256mib_busbw_gbps']:>17.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
