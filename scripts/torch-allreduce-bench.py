#!/usr/bin/env python3
"""All-reduce bus bandwidth with PyTorch (NCCL), the yardstick for air-nccl-check.

Run it under air-run, one process per GPU, with the same GPUs as the check:

    air-run scripts/torch-allreduce-bench.py
    air-run --check --json > check.json
    air-run scripts/torch-allreduce-bench.py --compare check.json

It sweeps the sizes air-nccl-check sweeps (1 MiB to 256 MiB, powers of two)
with the same warmup and iteration rule, times each loop with CUDA events on
every rank, takes the slowest rank, and reports bus bandwidth as nccl-tests
defines it (busbw = bytes / time * 2(n-1)/n). Rank 0 prints one JSON line and
writes the same JSON to AIR_RESULT_FILE. With --compare, rank 0 also compares
the largest size with air-run --check's result and exits 1 when they differ
by more than 10%.

Without CUDA it runs on CPU with gloo (a smoke test of the script only).
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip()
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def iterations_for(nbytes, iters, max_bytes):
    """Same rule as air-nccl-check: `iters` at the largest size, more for smaller, at most 200."""
    return int(min(max(iters * max_bytes / nbytes, iters), 200))


def sizes(min_bytes, max_bytes):
    size = min_bytes
    while size <= max_bytes:
        yield size
        size *= 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", type=parse_size, default=1 << 20)
    parser.add_argument("--max-bytes", type=parse_size, default=256 << 20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--compare", metavar="CHECK_JSON", help="air-run --check --json output to compare with")
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    cuda = torch.cuda.is_available()
    if cuda:
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")

    def synchronize():
        if cuda:
            torch.cuda.synchronize(device)

    bus_factor = 2.0 * (world - 1) / world
    results = []
    for nbytes in sizes(args.min_bytes, args.max_bytes):
        count = nbytes // 4
        iters = iterations_for(nbytes, args.iters, args.max_bytes)
        # One checked all-reduce of known values (exact small integers), then
        # the timed loop on zeros, so repeated in-place sums never overflow.
        buf = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
        dist.all_reduce(buf)
        synchronize()
        expected = world * (world + 1) / 2
        correct = bool(buf[0].item() == expected and buf[-1].item() == expected)
        buf.zero_()
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        synchronize()
        dist.barrier()
        if cuda:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                dist.all_reduce(buf)
            stop.record()
            stop.synchronize()
            elapsed_s = start.elapsed_time(stop) / 1000.0
        else:
            began = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(buf)
            elapsed_s = time.perf_counter() - began
        slowest = torch.tensor([elapsed_s], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        time_s = slowest.item() / iters
        algbw = nbytes / time_s / 1e9
        results.append({
            "bytes": nbytes,
            "iterations": iters,
            "time_us": time_s * 1e6,
            "algbw_gbps": algbw,
            "busbw_gbps": algbw * bus_factor,
            "correct": correct,
        })
        del buf

    exit_code = 0
    if rank == 0:
        report = {
            "tool": "torch-allreduce-bench",
            "torch_version": torch.__version__,
            "nccl_version": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
            "world_size": world,
            "device": torch.cuda.get_device_name(device) if cuda else "cpu",
            "results": results,
        }
        if args.compare:
            with open(args.compare) as f:
                check = json.load(f)
            check_rows = {row["bytes"]: row for row in check.get("nccl", {}).get("results", [])}
            largest = results[-1]
            theirs = check_rows.get(largest["bytes"])
            if theirs is None:
                report["compare"] = {"error": "no %d-byte result in %s" % (largest["bytes"], args.compare)}
                exit_code = 1
            else:
                ratio = theirs["busbw_gbps"] / largest["busbw_gbps"]
                within = abs(ratio - 1.0) <= 0.10
                report["compare"] = {
                    "bytes": largest["bytes"],
                    "air_nccl_check_busbw_gbps": theirs["busbw_gbps"],
                    "torch_busbw_gbps": largest["busbw_gbps"],
                    "ratio": ratio,
                    "within_10_percent": within,
                }
                exit_code = 0 if within else 1
        text = json.dumps(report)
        print(text, flush=True)
        result_file = os.environ.get("AIR_RESULT_FILE")
        if result_file:
            with open(result_file, "w") as f:
                f.write(text)
        if not all(row["correct"] for row in results):
            print("torch-allreduce-bench: a sum was wrong", file=sys.stderr)
            exit_code = 1
    dist.destroy_process_group()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
