#!/usr/bin/env python3
"""air-run against torchrun on the same machine, in one call.

  scripts/bench-vs-torchrun.py [--air-run build/cli/air-run] [--baseline build/fixtures/baseline_launcher]
                               [--torchrun torchrun] [--python python3] [--ranks 2,8,64]
                               [--repeat 3] [--example-repeat 2] [--json out.json] [--markdown out.md]

Measures, with both launchers, one after the other in the same run:

  - start to exit of N trivial ranks (`--no-python /bin/true`), with a plain
    fork/exec-and-wait of the same ranks as the floor;
  - time from one rank failing (the others sleeping) to the launcher's exit;
  - the launcher's own peak RSS (VmHWM, children excluded) while 8 ranks sleep,
    and while the product page's example trains;
  - on GPUs: wall time of the product page's example (configs/examples/simple_mlp_ddp.py
    on every GPU over NCCL), and the 256 MiB all-reduce bus bandwidth inside ranks
    each launcher started (scripts/torch-allreduce-bench.py). The launcher must not
    get in the way: the bandwidths should be equal.

Prints a Markdown table of raw figures and torchrun/air-run ratios: for times
and memory a ratio above 1 means air-run is faster or smaller; for bandwidth
1.0 means the launchers are equal. Nothing asserts: it is a benchmark, not a test.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

from benchlib import median_of, run_watched, teardown_time


def example_runs(make_cmd, target, repeat):
    """Median wall time, max launcher RSS and the last output of `repeat` runs of target."""
    walls, peaks, out, codes = [], [], "", set()
    for _ in range(repeat):
        wall, code, peak, out = run_watched(make_cmd(target))
        walls.append(wall)
        peaks.append(peak)
        codes.add(code)
    return statistics.median(walls), max(peaks), sorted(codes), out


def allreduce_busbw(out):
    """The 256 MiB bus bandwidth from torch-allreduce-bench's JSON line, or None."""
    for line in out.splitlines():
        i = line.find('{"tool": "torch-allreduce-bench"')
        if i >= 0:
            return json.loads(line[i:])["results"][-1]["busbw_gbps"]
    return None


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--air-run", default=os.path.join(root, "build/cli/air-run"))
    ap.add_argument("--baseline", default=os.path.join(root, "build/fixtures/baseline_launcher"))
    ap.add_argument("--torchrun", default="torchrun")
    ap.add_argument("--python", default=sys.executable, help="interpreter with torch, for the GPU part")
    ap.add_argument("--ranks", default="2,8,64")
    ap.add_argument("--repeat", type=int, default=3, help="runs per launch and teardown figure (median)")
    ap.add_argument("--example-repeat", type=int, default=2, help="runs of the GPU example per launcher (median)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    true = shutil.which("true") or "/bin/true"
    air = [args.air_run, "--grace-period", "10s"]
    cpu = ["--accelerator-type", "CPU", "-n"]  # N CPU ranks even on a GPU machine, no GPU probe
    torchrun = [args.torchrun, "--standalone"]
    result = {"launch": [], "gpu": None}
    table = []  # (what, air-run, torchrun, ratio torchrun/air-run)

    def row(what, a, t, unit, scale=1.0, fmt="{:.3f}"):
        table.append((what, fmt.format(a * scale) + unit, fmt.format(t * scale) + unit, f"{t / a:.1f}x"))
        print(f"{what}: air-run {fmt.format(a * scale)}{unit}, torchrun {fmt.format(t * scale)}{unit}", flush=True)

    for n in [int(x) for x in args.ranks.split(",")]:
        base, _ = median_of([args.baseline, str(n), true], args.repeat)
        a, a_codes = median_of(air + cpu + [str(n), "--no-python", true], args.repeat)
        t, t_codes = median_of(torchrun + [f"--nproc-per-node={n}", "--no-python", true], args.repeat)
        result["launch"].append({"ranks": n, "baseline_s": base, "air_run_s": a, "torchrun_s": t,
                                 "air_run_exit_codes": sorted(a_codes), "torchrun_exit_codes": sorted(t_codes)})
        row(f"{n} ranks of /bin/true, start to exit (fork/exec floor {base * 1000:.1f} ms)", a, t, " ms", 1000, "{:.1f}")

    with tempfile.TemporaryDirectory() as tmp:
        a = statistics.median(teardown_time(
            lambda n, s: air + cpu + [str(n), "--no-python", s], 4, tmp) for _ in range(args.repeat))
        t = statistics.median(teardown_time(
            lambda n, s: torchrun + [f"--nproc-per-node={n}", "--no-python", s], 4, tmp) for _ in range(args.repeat))
    result.update(teardown_air_run_s=a, teardown_torchrun_s=t)
    row("1 of 4 ranks fails: failure to launcher exit", a, t, " ms", 1000, "{:.1f}")

    a = run_watched(air + cpu + ["8", "--no-python", "sleep", "2"])[2]
    t = run_watched(torchrun + ["--nproc-per-node=8", "--no-python", "sleep", "2"])[2]
    result.update(idle_rss_air_run_kb=a, idle_rss_torchrun_kb=t)
    row("launcher peak RSS, 8 sleeping ranks", a, t, " MiB", 1 / 1024, "{:.1f}")

    try:
        import torch  # noqa: only for the GPU count; the ranks use args.python
        ngpu = torch.cuda.device_count()
    except ImportError:
        ngpu = 0
    if ngpu:
        example = [os.path.join(root, "configs/examples/simple_mlp_ddp.py"), "--epochs", "3"]
        bench = [os.path.join(root, "scripts/torch-allreduce-bench.py")]
        gpu_air = lambda target: air + ["--python", args.python] + target  # noqa: E731
        gpu_torchrun = lambda target: torchrun + [f"--nproc-per-node={ngpu}"] + target  # noqa: E731
        # GPU mode costs air-run an NVML probe (tens of ms, the library's pages in its RSS).
        a, _ = median_of(air + ["--no-python", true], args.repeat)
        t, _ = median_of(torchrun + [f"--nproc-per-node={ngpu}", "--no-python", true], args.repeat)
        result["gpu_mode_launch"] = {"ranks": ngpu, "air_run_s": a, "torchrun_s": t}
        row(f"{ngpu} ranks of /bin/true on the {ngpu} GPUs (air-run probes NVML)", a, t, " ms", 1000, "{:.1f}")
        a_wall, a_rss, a_codes, a_out = example_runs(gpu_air, example, args.example_repeat)
        t_wall, t_rss, t_codes, t_out = example_runs(gpu_torchrun, example, args.example_repeat)
        for name, codes, out in (("air-run", a_codes, a_out), ("torchrun", t_codes, t_out)):
            if codes != [0]:
                print(f"{name}: the example exited {codes}:\n{out[-3000:]}", file=sys.stderr)
        row(f"product page example, DDP on {ngpu} GPUs: wall time", a_wall, t_wall, " s", 1, "{:.2f}")
        row("launcher peak RSS during the example", a_rss, t_rss, " MiB", 1 / 1024, "{:.1f}")
        a_bw = allreduce_busbw(run_watched(gpu_air(bench))[3])
        t_bw = allreduce_busbw(run_watched(gpu_torchrun(bench))[3])
        result["gpu"] = {"gpus": ngpu, "example_wall_air_run_s": a_wall, "example_wall_torchrun_s": t_wall,
                         "example_exit_codes_air_run": a_codes, "example_exit_codes_torchrun": t_codes,
                         "example_rss_air_run_kb": a_rss, "example_rss_torchrun_kb": t_rss,
                         "busbw_256mib_air_run_gbps": a_bw, "busbw_256mib_torchrun_gbps": t_bw}
        if a_bw and t_bw:
            # Reported as torchrun/air-run like every row: 1.0 means the launcher is not in the way.
            row("256 MiB all-reduce bus bandwidth in the ranks", a_bw, t_bw, " GB/s", 1, "{:.1f}")
    else:
        print("no GPU (or no torch): the example and all-reduce rows are skipped", flush=True)

    lines = ["| measure | air-run | torchrun | torchrun / air-run |", "|---|---|---|---|"]
    lines += [f"| {w} | {a} | {t} | {r} |" for w, a, t, r in table]
    markdown = "\n".join(lines) + "\n"
    print()
    print(markdown)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
