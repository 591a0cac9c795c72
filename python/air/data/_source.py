"""Where a dataset's files come from: a local directory (also ``file://``), or
any other URL through fsspec."""

import fnmatch
import os
import shutil
import threading
import urllib.parse

COPY_CHUNK = 4 << 20
_buffers = threading.local()


def copy_stream(source, target):
    """Copies an open binary file to another, in 4 MiB writes through one
    reused buffer. Large writes matter: the kernel then keeps the copy in
    large page-cache folios, and later reads of it run as fast as reads of
    the original (a copy made with sendfile or small writes read back about
    20% slower here)."""
    readinto = getattr(source, "readinto", None)
    if readinto is None:
        shutil.copyfileobj(source, target, COPY_CHUNK)
        return
    buffer = getattr(_buffers, "buffer", None)
    if buffer is None:  # one per thread, kept: a fresh 4 MiB costs more than a small copy
        buffer = _buffers.buffer = memoryview(bytearray(COPY_CHUNK))
    while True:
        count = readinto(buffer)
        if not count:
            break
        target.write(buffer[:count])


def _visible(relative):
    # Dot-files and dot-directories (.ipynb_checkpoints, .DS_Store, partial
    # uploads) are not data.
    return not any(part.startswith(".") for part in relative.split("/"))


def _matches(relative, pattern):
    return _visible(relative) and fnmatch.fnmatchcase(relative, pattern)


class LocalSource:
    """A directory of this machine: a local disk, NFS, or a FUSE mount such
    as a Unity Catalog volume under /Volumes. Needs nothing but the standard
    library."""

    is_local = True

    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.url = "file://" + self.root

    def list(self, pattern):
        """[(relative name, size)], sorted by name, of the files matching pattern."""
        if not os.path.isdir(self.root):
            raise FileNotFoundError("air.data: %s is not a directory" % self.root)
        found = []
        for folder, dirs, files in os.walk(self.root, followlinks=True):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                full = os.path.join(folder, name)
                relative = os.path.relpath(full, self.root).replace(os.sep, "/")
                if _matches(relative, pattern):
                    found.append((relative, os.stat(full).st_size))
        found.sort()
        return found

    def path(self, relative):
        return os.path.join(self.root, relative)

    def fetch_into(self, relative, target):
        """Copies the file into `target`, an open binary file."""
        with open(self.path(relative), "rb") as source:
            copy_stream(source, target)


class FsspecSource:
    """A URL read through fsspec (s3://, gs://, abfs://, http(s)://, ...); the
    filesystem is made again in each process that reads."""

    is_local = False

    def __init__(self, url):
        self.url = url
        self._fs, self._root = _fsspec_filesystem(url)
        self._root = self._root.rstrip("/")

    def __getstate__(self):
        return {"url": self.url}

    def __setstate__(self, state):
        self.__init__(state["url"])

    def list(self, pattern):
        entries = self._fs.find(self._root, detail=True)
        found = []
        prefix = self._root + "/"
        for full, info in entries.items():
            if info.get("type", "file") != "file" or not full.startswith(prefix):
                continue
            relative = full[len(prefix):]
            if _matches(relative, pattern):
                found.append((relative, int(info.get("size") or 0)))
        found.sort()
        return found

    def fetch_into(self, relative, target):
        with self._fs.open(self._root + "/" + relative, "rb") as source:
            copy_stream(source, target)


def _fsspec_filesystem(url):
    try:
        import fsspec
    except ImportError:
        raise ImportError(
            "air.data: reading %r needs fsspec, which is not installed for this interpreter: "
            "install it (Debian: apt-get install python3-fsspec; pip: pip install fsspec, plus "
            "the protocol's package such as s3fs or gcsfs), or use a local path or file:// URL"
            % url) from None
    return fsspec.core.url_to_fs(url)


def local_root(path_or_url):
    """The directory a local path or file:// URL names, else None (a URL)."""
    text = os.fspath(path_or_url)
    if "://" not in text:
        return text
    parsed = urllib.parse.urlparse(text)
    if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
        return urllib.parse.unquote(parsed.path)
    return None


def open_source(path_or_url):
    root = local_root(path_or_url)
    if root is not None:
        return LocalSource(root)
    return FsspecSource(os.fspath(path_or_url))
