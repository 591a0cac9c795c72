"""What a checkpoint save checks around DCP's own work: that its disk has the
room (a full disk made torch report ``unexpected pos 320 vs 240`` from its zip
writer and nothing said "No space left on device"), and that no other run is
committing into the same directory at the same time (two runs sharing one
``--checkpoint-dir`` interleaved their commits)."""

import errno
import json
import os
import socket
import sys

LOCK_NAME = ".air-checkpoint.lock"
# Room beyond the tensors' bytes: DCP's metadata, the zip headers, the marker.
MARGIN_BYTES = 64 * 1024


def _existing(path):
    """`path` or its nearest folder that exists: where a statvfs can look."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def mount_of(path):
    """(mount point, file system type) of the disk that holds `path`, from
    /proc/self/mountinfo; (the path itself, "") where that cannot be read."""
    path = os.path.realpath(_existing(path))
    best, kind = "", ""
    try:
        with open("/proc/self/mountinfo", "r", encoding="utf-8", errors="replace") as f:
            for line in f:
                fields = line.split()
                if " - " not in line or len(fields) < 5:
                    continue
                point = fields[4].replace("\\040", " ")
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, kind = point, line.split(" - ", 1)[1].split()[0]
    except OSError:
        pass
    return (best or path), kind


def free_bytes(path):
    """Bytes an unprivileged writer may still use on the disk of `path`."""
    st = os.statvfs(_existing(path))
    return st.f_bavail * st.f_frsize


def state_bytes(obj, seen=None):
    """The tensors' bytes in a state dict (nested dicts, lists, tuples and
    objects with a state_dict(), such as an optimizer), each storage once.
    Anything else counts 0: the estimate errs low, never refusing a save
    that fits."""
    seen = set() if seen is None else seen
    try:
        import torch
    except ImportError:
        return 0
    if isinstance(obj, torch.Tensor):
        try:
            key = (obj.data_ptr(), obj.numel(), obj.element_size())
        except Exception:
            return 0
        if key in seen or getattr(obj, "is_meta", False):
            return 0
        seen.add(key)
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(state_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(state_bytes(v, seen) for v in obj)
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        try:
            return state_bytes(obj.state_dict(), seen)
        except Exception:
            return 0
    return 0


def _size(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return "%.1f %s" % (n / scale, unit)
    return "%d bytes" % n


def no_space_error(target, needed, free):
    """The OSError a save raises for a disk without room, naming the disk,
    the folder, and the bytes needed and free."""
    point, kind = mount_of(os.path.dirname(target))
    disk = point + (" (%s)" % kind if kind else "")
    return OSError(errno.ENOSPC, "No space left on device: air.data cannot save the checkpoint %s: "
                                 "it needs %s (%d bytes), the disk %s has %s (%d bytes) free"
                   % (target, _size(needed), needed, disk, _size(free), free))


def check_space(target, state_dict, process_group, no_dist):
    """Raises no_space_error on every rank, before anything is written, when
    the ranks that share a disk need more than it has free. Collective
    unless no_dist: one rank that raised alone would leave the others
    waiting in DCP's collectives."""
    parent = os.path.dirname(target)
    here = _existing(parent)
    mine = (socket.gethostname(), os.stat(here).st_dev, state_bytes(state_dict) + MARGIN_BYTES,
            free_bytes(here))
    everyone = [mine]
    if not no_dist:
        import torch.distributed as dist
        everyone = [None] * dist.get_world_size(process_group)
        dist.all_gather_object(everyone, mine, group=process_group)
    disks = {}
    for host, dev, needed, free in everyone:
        total, least = disks.get((host, dev), (0, free))
        disks[(host, dev)] = (total + needed, min(least, free))
    short = [(needed, free) for needed, free in disks.values() if needed > free]
    if short:
        needed, free = max(short, key=lambda s: s[0] - s[1])
        raise no_space_error(target, needed, free)


def ran_out_of_space(error, target):
    """Whether a save's failure is its disk running full: errno ENOSPC or
    "No space left" anywhere in the exception's chain, or the disk all but
    full once it failed (torch's zip writer says only "unexpected pos")."""
    seen = 0
    while error is not None and seen < 16:
        if getattr(error, "errno", None) == errno.ENOSPC or "No space left" in str(error):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    try:
        return free_bytes(os.path.dirname(target)) < MARGIN_BYTES
    except OSError:
        return False


class CommitLock:
    """An exclusive flock on ``<root>/.air-checkpoint.lock`` for one save,
    from the choice of its name to its commit; the file names the holder
    (run id, host, pid). A second run that shares the directory waits for
    it, after saying who holds it. Re-entrant within this process."""

    _held = {}  # root -> (fd, depth)

    def __init__(self, root):
        self.root = os.path.abspath(root)

    def __enter__(self):
        fd, depth = CommitLock._held.get(self.root, (None, 0))
        if fd is not None:
            CommitLock._held[self.root] = (fd, depth + 1)
            return self
        import fcntl

        os.makedirs(self.root, exist_ok=True)
        fd = os.open(os.path.join(self.root, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                sys.stderr.write("air.data: waiting to save into %s: %s is committing a checkpoint "
                                 "there (two runs share this checkpoint directory)\n"
                                 % (self.root, self.holder(fd)))
                sys.stderr.flush()
                fcntl.flock(fd, fcntl.LOCK_EX)
            me = {"run_id": os.environ.get("AIR_RUN_ID", ""), "host": socket.gethostname(),
                  "pid": os.getpid()}
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        CommitLock._held[self.root] = (fd, 1)
        return self

    def __exit__(self, *exc):
        fd, depth = CommitLock._held[self.root]
        if depth > 1:
            CommitLock._held[self.root] = (fd, depth - 1)
            return False
        del CommitLock._held[self.root]
        os.close(fd)  # closing the last descriptor releases the flock
        return False

    @staticmethod
    def holder(fd):
        """"run R on host H (pid P)", as the holder wrote it."""
        try:
            record = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
        except (OSError, ValueError):
            record = {}
        if not isinstance(record, dict) or not record:
            return "another process"
        run = record.get("run_id") or "?"
        return "run %s on host %s (pid %s)" % (run, record.get("host", "?"), record.get("pid", "?"))
