"""VolumeDataset: the files of a directory or URL as a torch IterableDataset,
split across ranks and DataLoader workers, read through a node-local cache,
resumable mid-epoch. VolumeLoader: a DataLoader over it that keeps the
progress exact with worker processes."""

import os

import torch.utils.data

from air.data import _shards
from air.data._cache import VolumeCache, parse_size
from air.data._source import open_source

STATE_FORMAT = 1
# State entries that must be equal for a state to resume this dataset.
_SAME_KEYS = ("files", "fingerprint", "rank", "world_size", "seed", "shuffle", "uneven")


def read_bytes(path):
    """The default decode: the file's bytes."""
    with open(path, "rb") as f:
        return f.read()


def _env_int(name):
    text = os.environ.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError("air.data: $%s=%r is not an integer" % (name, text)) from None


def _rank_and_world(rank, world_size):
    """Explicit values, else $RANK / $WORLD_SIZE (set by air-run and torchrun),
    else the default process group when one is initialised, else 0 of 1."""
    if rank is None:
        rank = _env_int("RANK")
    if world_size is None:
        world_size = _env_int("WORLD_SIZE")
    if rank is None or world_size is None:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            rank = dist.get_rank() if rank is None else rank
            world_size = dist.get_world_size() if world_size is None else world_size
    rank = 0 if rank is None else rank
    world_size = 1 if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError("air.data: rank %d is not within a world of %d" % (rank, world_size))
    return rank, world_size


class VolumeDataset(torch.utils.data.IterableDataset):
    """The files under ``path_or_url`` that match ``pattern``, one sample per
    file: ``decode(local_path)`` (default: the file's bytes).

    - The files are listed once, here, sorted by name; every rank must see the
      same list (a resumed state checks it).
    - Each epoch has its own order (``shuffle``: a permutation from
      ``seed`` and the epoch, identical on every rank; ``set_epoch(e)``
      chooses the epoch). Rank r of W reads every W-th file of that order from
      position r; DataLoader workers split the rank's files the same way, so
      no file is read twice or lost.
    - Uneven counts: by default every file is read exactly once per epoch and
      ranks differ by at most one file. ``drop_last=True`` skips the last
      (count % W) files of the epoch order, ``pad=True`` repeats files from
      its start, so every rank reads the same number (DDP's collectives need
      equal batch counts).
    - Files are read through a node-local cache (``cache_dir``, bounded to
      ``cache_size``): fetched once per machine and shared by its ranks.
      ``cache=None`` caches URLs and reads local directories in place;
      ``cache=True`` also caches local directories (e.g. a network or FUSE
      mount); ``cache=False`` never caches (URLs are then fetched on each read).
    - ``state_dict()`` records what this process has received in the current
      epoch; ``load_state_dict()`` makes the next iteration read exactly the
      rest. Progress is recorded when the dataset is iterated here: directly,
      through ``DataLoader(num_workers=0)``, or through ``loader(...)`` with
      any number of workers.
    """

    def __init__(self, path_or_url, pattern="*", *, shuffle=True, seed=0, decode=None,
                 cache=None, cache_dir=None, cache_size=None, drop_last=False, pad=False,
                 rank=None, world_size=None):
        super().__init__()
        if drop_last and pad:
            raise ValueError("air.data: drop_last and pad are exclusive: drop_last skips the "
                             "files past an even split, pad repeats files to reach one")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError("air.data: seed must be an int, not %r" % (seed,))
        if decode is not None and not callable(decode):
            raise TypeError("air.data: decode must be callable (it gets a local file path), "
                            "not %r" % (decode,))
        self.path_or_url = os.fspath(path_or_url)
        self.pattern = pattern
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.decode = decode if decode is not None else read_bytes
        self.uneven = "drop_last" if drop_last else "pad" if pad else "exact"
        self.rank, self.world_size = _rank_and_world(rank, world_size)
        self._source = open_source(self.path_or_url)
        self.cache = (not self._source.is_local) if cache is None else bool(cache)
        self.cache_dir = cache_dir
        self.cache_size = None if cache_size is None else parse_size(cache_size)
        entries = self._source.list(pattern)
        if not entries:
            raise FileNotFoundError("air.data: no file under %s matches %r"
                                    % (self.path_or_url, pattern))
        self.files = [name for name, _ in entries]
        self.sizes = [size for _, size in entries]
        self.fingerprint = _shards.fingerprint(entries)
        self.epoch = 0
        self._slice = None  # (epoch, [file index]) of this rank
        self._progress = None
        self._restored = False
        self._cache = None
        self._cache_pid = None

    # ------------------------------------------------------------------ epochs

    def set_epoch(self, epoch):
        """Chooses the epoch the next iteration reads (its order, with
        shuffle). Setting the current epoch again keeps its progress, so a
        loop that resumes with ``set_epoch(saved_epoch)`` reads the rest."""
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError("air.data: epoch must be an int >= 0, not %r" % (epoch,))
        if epoch != self.epoch:
            self.epoch = epoch
            self._progress = None
            self._restored = False

    def epoch_files(self):
        """Relative names this rank reads in the current epoch, in order."""
        return [self.files[i] for i in self._rank_slice()]

    def __len__(self):
        """Samples this rank reads in a whole epoch."""
        return len(self._rank_slice())

    def _rank_slice(self):
        if self._slice is None or self._slice[0] != self.epoch:
            order = _shards.epoch_order(len(self.files), self.shuffle, self.seed, self.epoch)
            self._slice = (self.epoch, _shards.rank_slice(order, self.rank, self.world_size,
                                                          self.uneven))
        return self._slice[1]

    def _progress_record(self):
        if self._progress is None:
            self._progress = _shards.Progress(len(self._rank_slice()))
        return self._progress

    # ------------------------------------------------------------------ iteration

    def _begin(self):
        """Positions still to read this epoch. An epoch read to the end starts
        over (as a sampler does when iterated again without set_epoch),
        except right after load_state_dict: a state saved at the end of an
        epoch resumes with nothing left of that epoch."""
        progress = self._progress_record()
        if progress.complete() and not self._restored:
            self._progress = progress = _shards.Progress(progress.length)
        self._restored = False
        return progress.remaining()

    def _mark(self, positions):
        progress = self._progress_record()
        for position in positions:
            progress.mark(position)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        remaining = self._begin()
        read = self._position_reader()
        if info is None:
            progress = self._progress_record()
            for position in remaining:
                sample = read(position)
                progress.mark(position)
                yield sample
        else:
            for position in _shards.worker_positions(remaining, info.id, info.num_workers):
                yield read(position)

    def _position_reader(self):
        """A function: position in this epoch's slice -> sample. Everything it
        needs is looked up once, here, not once per file."""
        files, sizes, decode, source = self.files, self.sizes, self.decode, self._source
        rank_slice = self._rank_slice()
        if not self.cache:
            if source.is_local:
                return lambda position: decode(source.path(files[rank_slice[position]]))
            return lambda position: self._read_uncached(rank_slice[position])
        pin = self._cache_here().pin
        whole = decode is read_bytes  # read through the pinned descriptor: one open less

        def read(position):
            index = rank_slice[position]
            pinned = pin(source, files[index], sizes[index])
            try:
                return pinned.read() if whole else decode(pinned.path)
            finally:
                pinned.close()

        return read

    def read(self, index):
        """decode() of file number `index` of ``files``, through the cache."""
        if not self.cache:
            if self._source.is_local:
                return self.decode(self._source.path(self.files[index]))
            return self._read_uncached(index)
        pinned = self._cache_here().pin(self._source, self.files[index], self.sizes[index])
        try:
            return pinned.read() if self.decode is read_bytes else self.decode(pinned.path)
        finally:
            pinned.close()

    def _read_uncached(self, index):
        import tempfile
        handle, temporary = tempfile.mkstemp(prefix="air-data-")
        try:
            with open(handle, "wb") as target:
                self._source.fetch_into(self.files[index], target)
            return self.decode(temporary)
        finally:
            os.unlink(temporary)

    def _cache_here(self):
        # One cache object per process: DataLoader workers get their own.
        if self._cache is None or self._cache_pid != os.getpid():
            self._cache = VolumeCache(self.cache_dir, self.cache_size)
            self._cache_pid = os.getpid()
        return self._cache

    def cache_stats(self):
        """What this process's cache did: fetched, fetched_bytes, hits, evicted."""
        if self._cache is None or self._cache_pid != os.getpid():
            return {"fetched": 0, "fetched_bytes": 0, "hits": 0, "evicted": 0}
        return dict(self._cache.stats)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_cache"] = None
        state["_cache_pid"] = None
        return state

    # ------------------------------------------------------------------ resuming

    def state_dict(self):
        """This rank's position: the epoch and which of its files it has
        received. Plain values (JSON, torch.save and DCP all take it)."""
        progress = self._progress_record()
        return {
            "format": STATE_FORMAT,
            "epoch": self.epoch,
            "files": len(self.files),
            "fingerprint": self.fingerprint,
            "rank": self.rank,
            "world_size": self.world_size,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "uneven": self.uneven,
            "consumed": progress.encode(),
            "consumed_count": progress.count,
        }

    def load_state_dict(self, state):
        """Resumes from state_dict(): the next iteration reads the rest of
        that epoch. The files, rank, world size, seed, shuffle and uneven mode
        must be the same (ValueError naming what differs)."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ValueError("air.data: not a VolumeDataset state (format %d expected)"
                             % STATE_FORMAT)
        mine = self.state_dict()
        differ = ["%s (saved %r, now %r)" % (k, state.get(k), mine[k])
                  for k in _SAME_KEYS if state.get(k) != mine[k]]
        if differ:
            raise ValueError("air.data: the state was saved by a different setup: %s"
                             % "; ".join(differ))
        self.set_epoch(int(state["epoch"]))
        length = len(self._rank_slice())
        self._progress = _shards.Progress.decode(state["consumed"], length)
        self._restored = True

    def loader(self, batch_size=1, num_workers=0, collate_fn=None, **dataloader_kwargs):
        """A VolumeLoader over this dataset (see there)."""
        return VolumeLoader(self, batch_size=batch_size, num_workers=num_workers,
                            collate_fn=collate_fn, **dataloader_kwargs)

    def __repr__(self):
        return "VolumeDataset(%r, pattern=%r, files=%d, rank=%d/%d, epoch=%d)" % (
            self.path_or_url, self.pattern, len(self.files), self.rank, self.world_size,
            self.epoch)


class _MarkedBatches(torch.utils.data.IterableDataset):
    """The batches of one epoch, each with the slice positions it holds."""

    def __init__(self, dataset, batch_size, collate_fn, remaining):
        super().__init__()
        self.dataset = dataset
        self.batch_size = batch_size
        self.collate_fn = collate_fn
        self.remaining = remaining

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        positions = self.remaining
        if info is not None:
            positions = _shards.worker_positions(positions, info.id, info.num_workers)
        read = self.dataset._position_reader()
        step = self.batch_size or 1
        for start in range(0, len(positions), step):
            chunk = positions[start:start + step]
            samples = [read(p) for p in chunk]
            if self.batch_size is None:
                yield samples[0], chunk
            else:
                yield self.collate_fn(samples), chunk


class VolumeLoader:
    """A torch DataLoader over a VolumeDataset that records, in the main
    process, exactly which files each batch it hands out holds, so that
    ``state_dict()`` is exact with any number of worker processes.

    Each worker batches its own files (as with any IterableDataset): with W
    workers an epoch has sum over workers of ceil(files of the worker /
    batch_size) batches. ``batch_size=None`` yields single samples. Other
    keyword arguments go to the DataLoader (pin_memory, prefetch_factor,
    timeout, multiprocessing_context...); ``persistent_workers`` is refused,
    since each epoch's workers must start from the current epoch and
    progress.
    """

    def __init__(self, dataset, batch_size=1, num_workers=0, collate_fn=None,
                 **dataloader_kwargs):
        if not isinstance(dataset, VolumeDataset):
            raise TypeError("VolumeLoader needs a VolumeDataset, not %r" % (dataset,))
        if dataloader_kwargs.get("persistent_workers"):
            raise ValueError("VolumeLoader: persistent_workers=True would keep the workers of "
                             "an old epoch; leave it out")
        for refused in ("sampler", "batch_sampler", "shuffle", "drop_last"):
            if refused in dataloader_kwargs:
                raise ValueError("VolumeLoader: %s is not an option here: the VolumeDataset "
                                 "orders and splits the files (see its shuffle, seed, "
                                 "drop_last and pad)" % refused)
        if batch_size is not None and (isinstance(batch_size, bool) or batch_size < 1):
            raise ValueError("VolumeLoader: batch_size must be >= 1 or None, not %r"
                             % (batch_size,))
        self.dataset = dataset
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.collate_fn = collate_fn or torch.utils.data.default_collate
        self.dataloader_kwargs = dataloader_kwargs

    def __iter__(self):
        remaining = self.dataset._begin()
        view = _MarkedBatches(self.dataset, self.batch_size, self.collate_fn, remaining)
        loader = torch.utils.data.DataLoader(view, batch_size=None, num_workers=self.num_workers,
                                             **self.dataloader_kwargs)
        for batch, positions in loader:
            self.dataset._mark(positions)
            yield batch

    def __len__(self):
        """Batches in a whole epoch of this rank."""
        count = len(self.dataset)
        if self.batch_size is None:
            return count
        workers = max(self.num_workers, 1)
        shares = [len(range(w, count, workers)) for w in range(workers)]
        return sum(-(-share // self.batch_size) for share in shares)

    def set_epoch(self, epoch):
        self.dataset.set_epoch(epoch)

    def state_dict(self):
        return self.dataset.state_dict()

    def load_state_dict(self, state):
        self.dataset.load_state_dict(state)
