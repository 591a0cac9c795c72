"""air.data's split of files across ranks and workers, and its progress record
(pure functions; no torch needed)."""

import collections
import itertools

import pytest

from air.data import _shards


@pytest.mark.parametrize("count, world", [(23, 2), (23, 4), (8, 4), (3, 4), (1, 1), (100, 7)])
def test_exact_reads_every_file_once(count, world):
    order = _shards.epoch_order(count, True, 5, 3)
    slices = [_shards.rank_slice(order, r, world) for r in range(world)]
    together = list(itertools.chain(*slices))
    assert sorted(together) == list(range(count))
    assert max(map(len, slices)) - min(map(len, slices)) <= 1


@pytest.mark.parametrize("count, world", [(23, 2), (23, 4), (3, 4), (100, 7)])
def test_drop_last_and_pad_give_equal_counts(count, world):
    order = _shards.epoch_order(count, True, 0, 0)
    dropped = [_shards.rank_slice(order, r, world, "drop_last") for r in range(world)]
    assert {len(s) for s in dropped} == {count // world}
    flat = list(itertools.chain(*dropped))
    assert len(set(flat)) == len(flat) == count - count % world
    assert set(flat) == set(order[:len(flat)])  # the tail of the epoch order is skipped

    padded = [_shards.rank_slice(order, r, world, "pad") for r in range(world)]
    assert {len(s) for s in padded} == {-(-count // world)}
    flat = list(itertools.chain(*padded))
    assert set(flat) == set(range(count))  # nothing lost
    repeats = sum(n - 1 for n in collections.Counter(flat).values())
    assert repeats == len(flat) - count


def test_epoch_order_is_deterministic_and_differs_per_epoch_and_seed():
    a = _shards.epoch_order(50, True, 1, 0)
    assert a == _shards.epoch_order(50, True, 1, 0)
    assert sorted(a) == list(range(50))
    assert a != _shards.epoch_order(50, True, 1, 1)
    assert a != _shards.epoch_order(50, True, 2, 0)
    assert _shards.epoch_order(50, False, 1, 7) == list(range(50))


def test_worker_shares_round_robin_back_to_the_slice():
    remaining = list(range(11))
    shares = [_shards.worker_positions(remaining, w, 3) for w in range(3)]
    merged = [x for group in itertools.zip_longest(*shares) for x in group if x is not None]
    assert merged == remaining


def test_unknown_uneven_mode():
    with pytest.raises(ValueError, match="uneven must be one of exact, drop_last, pad"):
        _shards.rank_slice([0, 1], 0, 2, "round")


def test_progress_round_trip():
    progress = _shards.Progress(21)
    for position in (0, 3, 20, 3):
        progress.mark(position)
    assert progress.count == 3
    copy = _shards.Progress.decode(progress.encode(), 21)
    assert copy.count == 3
    assert copy.remaining() == [p for p in range(21) if p not in (0, 3, 20)]
    assert not copy.complete()
    with pytest.raises(ValueError, match="does not match a slice of 40 files"):
        _shards.Progress.decode(progress.encode(), 40)


def test_fingerprint_depends_on_names_and_sizes():
    base = _shards.fingerprint([("a", 1), ("b", 2)])
    assert base == _shards.fingerprint([("a", 1), ("b", 2)])
    assert base != _shards.fingerprint([("a", 1), ("b", 3)])
    assert base != _shards.fingerprint([("a", 1), ("c", 2)])
