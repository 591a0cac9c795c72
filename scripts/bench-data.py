#!/usr/bin/env python3
"""air.data.VolumeDataset read throughput (issue 18), with torch installed:

  /usr/bin/python3 scripts/bench-data.py [--files 200] [--size 1M] [--runs 7]

Writes --files files of --size bytes into a temporary directory, then times,
interleaved in one run (median of --runs):

- plain:    a loop that opens and reads each file (the baseline);
- warm:     one epoch of VolumeDataset(cache=True) whose node cache already
            holds every file (decode = the default, read the bytes);
- in-place: one epoch of VolumeDataset with a local directory read in place
            (cache=None, the default for local paths);
- copy:     a loop that copies each file to a fresh directory (what a fetch
            does, without the cache's bookkeeping);
- cold:     one epoch of VolumeDataset(cache=True) into an empty cache.

It prints throughput ratios against plain (target: warm >= 0.90) and the cold
cache's fetch cost per file (a cold epoch less a warm one) next to a plain
shutil.copyfile of the same file, from the best run of each
(least disturbed by other load on the machine) and from the medians.
Everything is in the page cache, so this measures air.data's own cost per
file, not the disk's.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from air.data import VolumeDataset  # noqa: E402
from air.data._cache import parse_size  # noqa: E402


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--size", default="1M")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    size = parse_size(args.size)

    work = tempfile.mkdtemp(prefix="air-bench-data-")
    try:
        data = os.path.join(work, "data")
        os.mkdir(data)
        block = os.urandom(size)
        for i in range(args.files):
            with open(os.path.join(data, "part-%05d.bin" % i), "wb") as f:
                f.write(block)
        names = sorted(os.listdir(data))
        total = args.files * size

        def plain():
            for name in names:
                with open(os.path.join(data, name), "rb") as f:
                    f.read()

        warm_cache = os.path.join(work, "warm-cache")
        warm = VolumeDataset(data, cache=True, cache_dir=warm_cache, rank=0, world_size=1)
        for _ in warm:  # fill the cache
            pass
        assert warm.cache_stats()["fetched"] == args.files
        in_place = VolumeDataset(data, rank=0, world_size=1)

        def epoch(dataset):
            def run():
                for _ in dataset:
                    pass
            return run

        counter = [0]

        def copy_loop():
            counter[0] += 1
            target = os.path.join(work, "copy-%d" % counter[0])
            os.mkdir(target)
            for name in names:
                shutil.copyfile(os.path.join(data, name), os.path.join(target, name))
            shutil.rmtree(target)

        def cold():
            counter[0] += 1
            cache_dir = os.path.join(work, "cold-%d" % counter[0])
            dataset = VolumeDataset(data, cache=True, cache_dir=cache_dir, rank=0, world_size=1)
            for _ in dataset:
                pass
            assert dataset.cache_stats()["fetched"] == args.files
            shutil.rmtree(cache_dir)

        # cold and copy include an rmtree of what they wrote, alike for both.
        methods = {"plain": plain, "warm": epoch(warm), "in-place": epoch(in_place),
                   "copy": copy_loop, "cold": cold}
        times = {name: [] for name in methods}
        for fn in methods.values():
            fn()  # one untimed round: page cache, imports
        for _ in range(args.runs):
            for name, fn in methods.items():
                times[name].append(timed(fn))
        print("%d files of %d bytes (%.0f MiB), %d runs"
              % (args.files, size, total / 2 ** 20, args.runs))
        for label, pick in (("best run", min), ("median", statistics.median)):
            best = {name: pick(t) for name, t in times.items()}
            print("%s:" % label)
            for name in ("plain", "warm", "in-place", "copy", "cold"):
                print("  %-9s %8.1f ms  %8.1f us/file  %7.0f MiB/s" % (
                    name, best[name] * 1e3, best[name] / args.files * 1e6,
                    total / 2 ** 20 / best[name]))
            print("  warm cache / plain loop throughput: %.2f (target >= 0.90)"
                  % (best["plain"] / best["warm"]))
            print("  in-place / plain loop throughput:   %.2f" % (best["plain"] / best["in-place"]))
            # A cold epoch fetches and then reads each file: its fetch is cold - warm.
            fetch = (best["cold"] - best["warm"]) / args.files * 1e6
            copy = best["copy"] / args.files * 1e6
            print("  cold cache: fetch %.1f us/file (cold - warm epoch), shutil.copyfile %.1f "
                  "us/file, overhead %.1f us/file" % (fetch, copy, fetch - copy))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
