"""air.data.VolumeDataset: every file once per epoch across real ranks (air-run,
torch on CPU) and DataLoader workers, per-epoch order, the node cache across
epochs, uneven splits, mid-epoch resume, URLs through fsspec."""

import json
import os

import pytest

import air
from conftest import run_python

pytestmark = pytest.mark.usefixtures("torch")  # VolumeDataset is a torch IterableDataset

FILES = 23  # a multiple of neither 2 nor 4


def name_of(path):
    """decode for the tests: the file's name (its content is checked elsewhere)."""
    with open(path, "rb") as f:
        assert f.read() == os.path.basename(path).encode()
    return os.path.basename(path)


def make_dataset_dir(folder, count=FILES):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        name = "sample-%03d.txt" % i
        (folder / name).write_bytes(name.encode())
    (folder / ".hidden.txt").write_bytes(b"not data")
    (folder / "notes.md").write_bytes(b"not matched")
    return sorted("sample-%03d.txt" % i for i in range(count))


def read_epochs(root, cache_dir, workers, epochs, **options):
    """On a rank: {workers: [[names of epoch 0], [names of epoch 1], ...]}."""
    from torch.utils.data import DataLoader
    from air.data import VolumeDataset
    out = {}
    for count in workers:
        ds = VolumeDataset(root, "*.txt", seed=7, decode=name_of, cache_dir=cache_dir, **options)
        loader = DataLoader(ds, batch_size=3, num_workers=count)
        out[count] = []
        for epoch in range(epochs):
            ds.set_epoch(epoch)
            out[count].append([name for batch in loader for name in batch])
    return out


def uneven_and_cached(root, cache_dir):
    """On a rank: what drop_last and pad read, and the cache's counts over
    three epochs (each file is fetched once on this node, whichever rank reads
    it in a later epoch)."""
    from air.data import VolumeDataset
    read = {}
    for mode in ("drop_last", "pad"):
        ds = VolumeDataset(root, "*.txt", seed=3, decode=name_of, cache=False, **{mode: True})
        read[mode] = list(ds)
    ds = VolumeDataset(root, "*.txt", seed=3, decode=name_of, cache=True, cache_dir=cache_dir)
    for epoch in range(3):
        ds.set_epoch(epoch)
        for _ in ds:
            pass
    return read, ds.cache_stats()


@air.distributed(timeout=180)
def read_on_ranks(root, cache_dir, also_uneven):
    epochs = read_epochs(root, os.path.join(cache_dir, "epochs"), [0, 1, 2], 2)
    extra = uneven_and_cached(root, os.path.join(cache_dir, "node")) if also_uneven else None
    return epochs, extra


def expected_order(root, rank, world, epoch, **options):
    from air.data import VolumeDataset
    ds = VolumeDataset(root, "*.txt", seed=7, rank=rank, world_size=world, **options)
    ds.set_epoch(epoch)
    return ds.epoch_files()


@pytest.mark.parametrize("world", [2, 4])
def test_every_file_once_per_epoch_on_ranks_and_workers(air_run, tmp_path, world):
    root = str(tmp_path / "data")
    names = make_dataset_dir(tmp_path / "data")
    run = air.distributed(read_on_ranks._fn, num_accelerators=world, timeout=180)
    outcome = run.distributed(root, str(tmp_path / "cache"), world == 4)
    results = [epochs for epochs, _ in outcome]
    for workers in (0, 1, 2):
        epochs = [[r[workers][e] for r in results] for e in range(2)]
        for per_rank in epochs:
            together = [name for rank_names in per_rank for name in rank_names]
            assert sorted(together) == names, "workers=%d" % workers
            assert max(map(len, per_rank)) - min(map(len, per_rank)) <= 1
        # Same seed: the same order in every process; another epoch, another order.
        for rank in range(world):
            for epoch in range(2):
                expected = expected_order(root, rank, world, epoch)
                assert sorted(epochs[epoch][rank]) == sorted(expected)
                if workers < 2:  # one reader: the order itself (two interleave by batch)
                    assert epochs[epoch][rank] == expected
        assert [n for r in epochs[0] for n in r] != [n for r in epochs[1] for n in r]
    assert results[0][0] == results[0][1]  # 0 and 1 workers read the same sequence
    if world == 4:
        check_uneven_and_cached([extra for _, extra in outcome], names,
                                str(tmp_path / "cache" / "node"))


def check_uneven_and_cached(results, names, cache_dir):
    dropped = [r[0]["drop_last"] for r in results]
    assert [len(x) for x in dropped] == [FILES // 4] * 4
    flat = [n for x in dropped for n in x]
    assert len(set(flat)) == len(flat) == FILES - FILES % 4
    padded = [r[0]["pad"] for r in results]
    assert [len(x) for x in padded] == [-(-FILES // 4)] * 4
    assert set(n for x in padded for n in x) == set(names)
    stats = [r[1] for r in results]
    assert sum(s["fetched"] for s in stats) == FILES
    assert sum(s["hits"] for s in stats) == 2 * FILES
    sources = [d for d in os.listdir(cache_dir) if not d.startswith(".")]
    assert len(sources) == 1
    assert sorted(os.listdir(os.path.join(cache_dir, sources[0]))) == names


def test_other_seed_other_order(tmp_path):
    from air.data import VolumeDataset
    make_dataset_dir(tmp_path / "data")
    a = VolumeDataset(str(tmp_path / "data"), seed=1, rank=0, world_size=1).epoch_files()
    b = VolumeDataset(str(tmp_path / "data"), seed=2, rank=0, world_size=1).epoch_files()
    c = VolumeDataset(str(tmp_path / "data"), shuffle=False, rank=0, world_size=1).epoch_files()
    assert sorted(a) == sorted(b) and a != b
    assert c == sorted(c)
    assert ".hidden.txt" not in a and "notes.md" in a  # "*" matches every visible file


@pytest.mark.parametrize("workers, resume_workers", [(0, 0), (1, 1), (2, 2), (2, 1), (0, 2)])
def test_resume_mid_epoch_reads_exactly_the_rest(tmp_path, workers, resume_workers):
    from air.data import VolumeDataset
    make_dataset_dir(tmp_path / "data")
    root = str(tmp_path / "data")

    def dataset():
        ds = VolumeDataset(root, "sample-*", seed=11, decode=name_of, rank=1, world_size=2)
        ds.set_epoch(4)
        return ds

    ds = dataset()
    whole_epoch = ds.epoch_files()
    batches = iter(ds.loader(batch_size=2, num_workers=workers))
    first = [name for _ in range(3) for name in next(batches)]
    state = json.loads(json.dumps(ds.state_dict()))  # plain values
    del batches
    assert state["consumed_count"] == 6 and state["epoch"] == 4

    again = dataset()
    again.load_state_dict(state)
    again.set_epoch(4)  # the usual resume loop: the same epoch keeps its progress
    rest = [name for batch in again.loader(batch_size=2, num_workers=resume_workers)
            for name in batch]
    assert not set(first) & set(rest)
    assert sorted(first + rest) == sorted(whole_epoch)
    if workers <= 1:
        assert first == whole_epoch[:6]
    if resume_workers <= 1:
        assert rest == [n for n in whole_epoch if n not in first]
    # The epoch is done; a state saved now resumes with nothing left of it.
    done = again.state_dict()
    third = dataset()
    third.load_state_dict(done)
    assert list(third) == []
    third.set_epoch(5)
    assert sorted(third) == sorted(third.epoch_files()) and len(third.epoch_files()) == 11


def test_direct_iteration_resumes_and_restarts(tmp_path):
    from air.data import VolumeDataset
    make_dataset_dir(tmp_path / "data", 5)
    ds = VolumeDataset(str(tmp_path / "data"), "*.txt", decode=name_of, rank=0, world_size=1)
    it = iter(ds)
    first = [next(it), next(it)]
    state = ds.state_dict()
    other = VolumeDataset(str(tmp_path / "data"), "*.txt", decode=name_of, rank=0, world_size=1)
    other.load_state_dict(state)
    assert first + list(other) == ds.epoch_files()
    # Iterating a finished epoch again, without set_epoch, reads it again (as a sampler does).
    assert list(other) == ds.epoch_files()


def test_a_state_from_another_setup_is_refused(tmp_path):
    from air.data import VolumeDataset
    make_dataset_dir(tmp_path / "data", 6)
    state = VolumeDataset(str(tmp_path / "data"), rank=0, world_size=2).state_dict()
    other = VolumeDataset(str(tmp_path / "data"), rank=0, world_size=3)
    with pytest.raises(ValueError) as info:
        other.load_state_dict(state)
    assert "world_size (saved 2, now 3)" in str(info.value)
    (tmp_path / "data" / "sample-999.txt").write_bytes(b"new file")
    grown = VolumeDataset(str(tmp_path / "data"), rank=0, world_size=2)
    with pytest.raises(ValueError, match="files \\(saved 7, now 8\\)"):
        grown.load_state_dict(state)


def test_options_are_checked(tmp_path):
    from air.data import VolumeDataset
    make_dataset_dir(tmp_path / "data", 3)
    root = str(tmp_path / "data")
    with pytest.raises(ValueError, match="drop_last and pad are exclusive"):
        VolumeDataset(root, drop_last=True, pad=True)
    with pytest.raises(FileNotFoundError, match="no file under .* matches '\\*.jpg'"):
        VolumeDataset(root, "*.jpg")
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        VolumeDataset(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="rank 2 is not within a world of 2"):
        VolumeDataset(root, rank=2, world_size=2)
    with pytest.raises(ValueError, match="persistent_workers"):
        VolumeDataset(root).loader(num_workers=1, persistent_workers=True)


def test_rank_and_world_come_from_the_environment(tmp_path, monkeypatch):
    from air.data import VolumeDataset
    make_dataset_dir(tmp_path / "data", 4)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    ds = VolumeDataset("file://" + str(tmp_path / "data"), "*.txt", shuffle=False)
    assert (ds.rank, ds.world_size) == (3, 4)
    assert ds.epoch_files() == ["sample-003.txt"]
    assert ds.cache is False  # a local directory is read in place unless cache=True


def test_fsspec_url_goes_through_the_cache(tmp_path):
    fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed (Debian: "
                                                  "python3-fsspec)")
    from air.data import VolumeDataset
    memory = fsspec.filesystem("memory")
    names = ["sample-%03d.txt" % i for i in range(6)]
    for name in names + ["sub/sample-100.txt"]:
        with memory.open("/air-test-data/" + name, "wb") as f:
            f.write(name.rsplit("/", 1)[-1].encode())
    try:
        ds = VolumeDataset("memory://air-test-data", "sample-*", decode=name_of,
                           cache_dir=str(tmp_path / "cache"), rank=0, world_size=1)
        assert ds.cache is True  # a URL is cached by default
        assert ds.files == names  # "sample-*" does not match sub/sample-100.txt
        assert sorted(ds) == names
        assert ds.cache_stats()["fetched"] == 6
        ds.set_epoch(1)
        assert sorted(ds) == names
        assert ds.cache_stats()["hits"] == 6
    finally:
        memory.rm("/air-test-data", recursive=True)


def test_without_fsspec_a_url_says_what_to_install(tmp_path):
    code = ("import sys; sys.modules['fsspec'] = None\n"
            "from air.data import VolumeDataset\n"
            "try:\n    VolumeDataset('s3://bucket/data')\n"
            "except ImportError as e:\n    print(e)\n")
    done = run_python(["-c", code])
    assert done.returncode == 0, done.stderr
    assert "needs fsspec, which is not installed" in done.stdout
    assert "python3-fsspec" in done.stdout
