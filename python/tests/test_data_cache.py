"""air.data's node-local cache: one fetch per file per node under concurrent
ranks (counted at the source), a bounded size with LRU eviction, pinned files
kept, stale copies fetched again."""

import collections
import hashlib
import os
import subprocess
import sys
import time

import pytest

import air
from air.data import _cache
from air.data._cache import VolumeCache
from air.data._source import LocalSource


class LoggingSource(LocalSource):
    """A local directory that logs every fetch (one O_APPEND line each, so
    several processes can share the log) and takes `delay` seconds per fetch,
    so that concurrent ranks race for the same files."""

    def __init__(self, root, log, delay=0.0):
        super().__init__(root)
        self.log = log
        self.delay = delay

    def fetch_into(self, relative, target):
        with open(self.log, "a") as f:
            f.write("%d %s\n" % (os.getpid(), relative))
        time.sleep(self.delay)
        super().fetch_into(relative, target)


def make_files(folder, count, size=1000):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / ("f%02d.bin" % i)).write_bytes(bytes([i]) * size)
    return sorted(os.listdir(str(folder)))


def fetch_counts(log):
    with open(log) as f:
        return collections.Counter(line.split(" ", 1)[1].strip() for line in f)


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def wait_for_everyone(folder, rank, world, timeout=60):
    """A barrier through files, so the ranks start fetching together."""
    open(os.path.join(folder, "ready-%d" % rank), "w").close()
    deadline = time.time() + timeout
    while len([n for n in os.listdir(folder) if n.startswith("ready-")]) < world:
        if time.time() > deadline:
            raise TimeoutError("the other ranks did not arrive")
        time.sleep(0.005)


@air.distributed(num_accelerators=4, timeout=120)
def race_for_files(root, cache_dir, log, barrier):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cache = VolumeCache(cache_dir, max_bytes=1 << 30)
    source = LoggingSource(root, log, delay=0.02)
    names = sorted(os.listdir(root))
    if rank % 2:
        names.reverse()  # half the ranks meet the others in the middle
    wait_for_everyone(barrier, rank, world)
    seen = {}
    for name in names:
        with cache.pin(source, name, os.path.getsize(os.path.join(root, name))) as path:
            seen[name] = digest(path)
    return cache.stats, seen


def test_concurrent_ranks_fetch_each_file_once(air_run, tmp_path):
    names = make_files(tmp_path / "src", 12)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    log = str(tmp_path / "fetches.log")
    results = race_for_files.distributed(str(tmp_path / "src"), str(tmp_path / "cache"), log,
                                         str(barrier))
    assert fetch_counts(log) == {name: 1 for name in names}
    assert sum(stats["fetched"] for stats, _ in results) == len(names)
    assert sum(stats["hits"] for stats, _ in results) == 3 * len(names)
    truth = {name: digest(str(tmp_path / "src" / name)) for name in names}
    assert all(seen == truth for _, seen in results)


def test_bound_evicts_least_recently_used(tmp_path, monkeypatch):
    monkeypatch.setattr(_cache, "TOUCH_AFTER_S", 0.0)  # every hit refreshes the LRU age
    names = make_files(tmp_path / "src", 10)
    log = str(tmp_path / "log")
    source = LoggingSource(str(tmp_path / "src"), log)
    cache = VolumeCache(str(tmp_path / "cache"), max_bytes=3500)
    held = lambda: sorted(os.listdir(os.path.join(cache.root, _cache.source_key(source.url))))

    for name in names[:3]:
        cache.pin(source, name, 1000).close()
    cache.pin(source, names[0], 1000).close()  # a hit: f00 becomes the most recent
    cache.pin(source, names[3], 1000).close()  # over the bound: f01 goes, not f00
    assert held() == [names[0], names[2], names[3]]
    for name in names[4:]:
        cache.pin(source, name, 1000).close()
    assert held() == names[7:]
    assert cache.stats == {"fetched": 10, "fetched_bytes": 10000, "hits": 1, "evicted": 7}
    assert cache.usage() == 3000
    cache.pin(source, names[0], 1000).close()  # evicted earlier: fetched again
    assert fetch_counts(log)[names[0]] == 2


def test_a_pinned_copy_is_not_evicted(tmp_path):
    names = make_files(tmp_path / "src", 4)
    source = LoggingSource(str(tmp_path / "src"), str(tmp_path / "log"))
    cache = VolumeCache(str(tmp_path / "cache"), max_bytes=1500)
    with cache.pin(source, names[0], 1000) as first:
        for name in names[1:]:
            cache.pin(source, name, 1000).close()
        assert os.path.exists(first)  # oldest, over the bound, but in use
        with open(first, "rb") as f:
            assert f.read() == bytes([0]) * 1000
    cache.pin(source, names[1], 1000).close()
    assert not os.path.exists(first)


def test_a_copy_of_another_size_is_fetched_again(tmp_path):
    names = make_files(tmp_path / "src", 1)
    log = str(tmp_path / "log")
    source = LoggingSource(str(tmp_path / "src"), log)
    cache = VolumeCache(str(tmp_path / "cache"), max_bytes=1 << 20)
    cache.pin(source, names[0], 1000).close()
    (tmp_path / "src" / names[0]).write_bytes(b"new")
    with cache.pin(source, names[0], 3) as path:
        with open(path, "rb") as f:
            assert f.read() == b"new"
    assert fetch_counts(log)[names[0]] == 2


def test_temporary_files_of_dead_fetches_are_removed(tmp_path):
    names = make_files(tmp_path / "src", 3)
    source = LocalSource(str(tmp_path / "src"))
    cache = VolumeCache(str(tmp_path / "cache"), max_bytes=1500)
    cache.pin(source, names[0], 1000).close()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = os.path.join(cache.root, _cache.source_key(source.url))
    orphan = os.path.join(folder, ".fetch-%d-abc" % dead.pid)
    mine = os.path.join(folder, ".fetch-%d-def" % os.getpid())
    for path in (orphan, mine):
        with open(path, "wb") as f:
            f.write(b"x" * 10)
    cache.pin(source, names[1], 1000).close()  # over the bound: a scan runs
    assert not os.path.exists(orphan)
    assert os.path.exists(mine)  # its process is alive


@pytest.mark.parametrize("text, size", [(1, 1), ("512", 512), ("2K", 2048), ("1.5M", 1572864),
                                        ("20G", 20 << 30), ("1TiB", 1 << 40), ("3 MB", 3 << 20)])
def test_parse_size(text, size):
    assert _cache.parse_size(text) == size


@pytest.mark.parametrize("bad", ["", "lots", "-1", 0, True])
def test_parse_size_refuses(bad):
    with pytest.raises((ValueError, TypeError)):
        _cache.parse_size(bad)
