"""A node-local file cache shared by the ranks of one machine.

Layout under the cache directory::

    <source key>/<relative name>     cached copies, named as in the source
    .fetch-locks                     fetch locks: byte n of it locks the names of hash stripe n
    .lock                            held while the size is counted and files evicted;
                                     holds the bytes cached, as counted at the last change

A file is fetched once per node: the process that misses takes the name's
fetch lock (a POSIX record lock on one byte of .fetch-locks: no lock file to
create per name), checks again, copies into a temporary name and renames it
in place, so a reader never sees half a file. Readers hold a shared flock on
the copy while they read it; eviction (least recently used first, when the
total passes the bound) takes an exclusive flock without waiting, and skips
files in use.
"""

import errno
import fcntl
import hashlib
import os
import re
import shutil
import tempfile
import time

LOCK_STRIPES = 4096
TOUCH_AFTER_S = 1.0  # a hit refreshes the copy's mtime (its LRU age) at most this often
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_cache_dir():
    """$AIR_DATA_CACHE_DIR, else <temp dir>/air-data-cache-<uid>: one per node
    and user, so the ranks of a machine share it."""
    explicit = os.environ.get("AIR_DATA_CACHE_DIR")
    if explicit:
        return explicit
    return os.path.join(tempfile.gettempdir(), "air-data-cache-%d" % os.getuid())


def parse_size(value):
    """Bytes from an int or a text such as "512M", "20G", "1.5T"."""
    if isinstance(value, bool):
        raise TypeError("cache_size must be a number of bytes or a text like '20G', not %r"
                        % (value,))
    if isinstance(value, int):
        size = value
    else:
        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)i?B?\s*", str(value), re.I)
        if not match:
            raise ValueError("cache_size %r is not a size: use bytes or a text like '512M', "
                             "'20G'" % (value,))
        scale = 1024 ** " KMGT".index(match.group(2).upper() or " ")
        size = int(float(match.group(1)) * scale)
    if size < 1:
        raise ValueError("cache_size must be at least 1 byte, got %r" % (value,))
    return size


def source_key(url):
    """A directory name for one source: readable tail plus a hash of the URL."""
    tail = _SAFE.sub("_", url.rstrip("/").rsplit("/", 1)[-1])[-40:] or "root"
    return "%s-%s" % (tail, hashlib.sha256(url.encode("utf-8")).hexdigest()[:12])


def _open_lock(path):
    # O_CREAT only when missing: an open with O_CREAT locks the directory,
    # which makes the ranks of a node queue behind each other.
    try:
        return os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


_fetch_lock_fds = {}  # (cache root, pid) -> descriptor of its .fetch-locks


def _fetch_lock_fd(root):
    """This process's descriptor of root/.fetch-locks, opened once and kept:
    closing any descriptor of a file drops all of the process's record locks
    on it (POSIX), so two caches of one root in one process share it."""
    key = (root, os.getpid())
    fd = _fetch_lock_fds.get(key)
    if fd is None:
        fd = _fetch_lock_fds[key] = _open_lock(os.path.join(root, ".fetch-locks"))
    return fd


class _StripeLock:
    """An exclusive POSIX record lock on one byte of the fetch-lock file.
    Record locks belong to the process, so this excludes other processes (the
    ranks, DataLoader workers), not other threads of this one; two threads
    fetching one name both write a full copy and the last rename wins."""

    def __init__(self, fd, stripe):
        self.fd = fd
        self.stripe = stripe

    def __enter__(self):
        fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, self.stripe)
        return self

    def __exit__(self, *exc):
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, self.stripe)


class _Flock:
    """An exclusive flock on a lock file, as a context manager."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        self.fd = _open_lock(self.path)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # closing releases the lock
        self.fd = None


class Pinned:
    """A cached copy held open with a shared flock: eviction leaves it alone
    until close(). ``read()`` reads it through the open descriptor."""

    def __init__(self, path, fd, size):
        self.path = path
        self.size = size
        self._fd = fd

    def read(self):
        """The whole copy (its size is fixed: copies are never written in place)."""
        data = os.pread(self._fd, self.size, 0)
        while len(data) < self.size:  # reads of 2 GiB and more come in parts
            more = os.pread(self._fd, self.size - len(data), len(data))
            if not more:
                break
            data += more
        return data

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        self.close()


class VolumeCache:
    """The cache of one directory, bounded to max_bytes (None: half of the free
    space of its filesystem, measured when it is opened). ``stats`` counts
    what this process did: fetched, fetched_bytes, hits, evicted."""

    def __init__(self, root=None, max_bytes=None):
        self.root = os.path.abspath(root or default_cache_dir())
        os.makedirs(self.root, exist_ok=True)
        self._fetch_locks = _fetch_lock_fd(self.root)
        if max_bytes is None:
            free = shutil.disk_usage(self.root).free
            max_bytes = max(free // 2, 1)
        self.max_bytes = parse_size(max_bytes)
        self.stats = {"fetched": 0, "fetched_bytes": 0, "hits": 0, "evicted": 0}
        self._folders = {}  # source URL -> its folder here

    # ------------------------------------------------------------------ reading

    def pin(self, source, relative, size):
        """The cached copy of `relative` from `source` (fetched first when it
        is missing or its size differs from `size`), pinned: use as
        ``with cache.pin(...) as path: ...``."""
        folder = self._folders.get(source.url)
        if folder is None:
            folder = self._folders[source.url] = os.path.join(self.root, source_key(source.url))
        path = folder + "/" + relative
        pinned = self._try_pin(path, size)
        if pinned is not None:
            self.stats["hits"] += 1
            return pinned
        stripe = int(hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:8], 16)
        with _StripeLock(self._fetch_locks, stripe % LOCK_STRIPES):
            pinned = self._try_pin(path, size)  # another rank may have fetched it meanwhile
            if pinned is not None:
                self.stats["hits"] += 1
                return pinned
            fetched = self._fetch(source, relative, path)
            pinned = self._try_pin(path, None)
        if pinned is None:
            raise OSError(errno.ENOENT, "air.data: the cached copy vanished right after its "
                          "fetch", path)
        self.stats["fetched"] += 1
        self.stats["fetched_bytes"] += fetched
        self._account(fetched, keep=path)
        return pinned

    def _try_pin(self, path, size):
        """A Pinned copy when `path` holds a complete copy of the right size."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            held = os.fstat(fd)
            # Evicted (or replaced by a new fetch) between open and flock: the
            # file has no name left, so this is not the cached copy any more.
            if held.st_nlink == 0:
                os.close(fd)
                return None
            if size is not None and held.st_size != size:
                os.close(fd)
                return None
            if time.time() - held.st_mtime > TOUCH_AFTER_S:
                try:
                    os.utime(fd)
                except PermissionError:
                    pass  # another user's copy in a shared cache: its LRU age stays
            return Pinned(path, fd, held.st_size)
        except BaseException:
            os.close(fd)
            raise

    def _fetch(self, source, relative, path):
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".fetch-%d-" % os.getpid(), dir=folder)
        try:
            with open(handle, "wb") as target:
                source.fetch_into(relative, target)
                size = target.tell()
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
        return size

    # ------------------------------------------------------------------ the bound

    def usage(self):
        """Bytes cached, as counted at the last change (None before the first)."""
        with _Flock(os.path.join(self.root, ".lock")) as lock:
            return _read_count(lock.fd)

    def _account(self, added, keep):
        with _Flock(os.path.join(self.root, ".lock")) as lock:
            usage = _read_count(lock.fd)
            if usage is None:
                usage = self._scan_total()
            else:
                usage += added
            if usage > self.max_bytes:
                usage = self._evict(keep)
            _write_count(lock.fd, usage)

    def _entries(self):
        """(mtime, size, path) of every cached copy; removes the temporary
        files of fetches whose process is gone."""
        entries = []
        for folder, dirs, files in os.walk(self.root):
            if folder == self.root:
                dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                full = os.path.join(folder, name)
                if folder == self.root:
                    continue  # .lock, .fetch-locks
                if name.startswith(".fetch-"):
                    _remove_orphan(full, name)
                    continue
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue
                entries.append((st.st_mtime, st.st_size, full))
        return entries

    def _scan_total(self):
        return sum(size for _, size, _ in self._entries())

    def _evict(self, keep):
        """Removes least recently used copies not in use until the total fits
        the bound; returns the new total."""
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= self.max_bytes:
                break
            if path == keep:
                continue
            if self._remove_unused(path):
                total -= size
                self.stats["evicted"] += 1
        return total

    @staticmethod
    def _remove_unused(path):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False  # a reader holds it
        try:
            os.unlink(path)
            return True
        except FileNotFoundError:
            return False
        finally:
            os.close(fd)


# The byte count is kept in the lock file itself, as fixed-width text, so an
# update is one pwrite under the lock (no temporary file, no rename).
_COUNT_WIDTH = 21


def _read_count(fd):
    text = os.pread(fd, _COUNT_WIDTH, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def _write_count(fd, value):
    os.pwrite(fd, ("%d" % value).rjust(_COUNT_WIDTH - 1).encode("ascii") + b"\n", 0)


def _remove_orphan(path, name):
    match = re.match(r"^\.fetch-(\d+)-", name)
    if not match:
        return
    try:
        os.kill(int(match.group(1)), 0)
        return  # still fetching
    except ProcessLookupError:
        pass
    except PermissionError:
        return
    try:
        os.unlink(path)
    except OSError:
        pass
