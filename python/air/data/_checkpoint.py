"""VolumeWriter / VolumeReader: torch Distributed Checkpoint (DCP) storage for
a directory, with an atomic commit, ``latest()`` and retention.

A checkpoint ``<root>/<name>`` is written into ``<root>/.<name>.partial``
and renamed to ``<root>/<name>`` only after every rank's data and the DCP
metadata are on disk (fsynced), with a ``.air-checkpoint`` file naming its
commit sequence. So a directory named like a checkpoint is always complete;
a save that dies midway leaves only the hidden ``.partial`` directory, which
``latest()`` and ``VolumeReader`` ignore and the next save of that name
replaces.

Under ``air-run --checkpoint-dir DIR`` the ranks get ``AIR_CHECKPOINT_DIR``
(absolute): ``save(state)`` without a path writes the next
``DIR/checkpoint-<sequence>``, ``latest()`` and ``checkpoints()`` without a
root look there, and ``load(state)`` without a path loads ``AIR_RESUME_FROM``,
the checkpoint air-run found to resume from (docs/restarts.md). air-run picks
that checkpoint with the same rule as ``checkpoints()`` (core/run/resume.cpp):
change both together; tests/data/checkpoint_trees.json holds the trees both
are tested against.
"""

import json
import os
import shutil
import time
import uuid

from air.data import _dcp, _guard
from air.data._source import local_root

MARKER = ".air-checkpoint"
METADATA = ".metadata"  # written by DCP itself, last of its files
MARKER_FORMAT = 1
CHECKPOINT_DIR_VAR = "AIR_CHECKPOINT_DIR"  # set by air-run --checkpoint-dir
RESUME_FROM_VAR = "AIR_RESUME_FROM"  # the checkpoint this attempt resumes from
DEFAULT_PREFIX = "checkpoint-"  # save() without a path: <AIR_CHECKPOINT_DIR>/checkpoint-<sequence>

dcp = _dcp.import_dcp()


def _directory(path):
    root = local_root(path)
    if root is None:
        raise ValueError("air.data: checkpoints are written to a directory of this machine (a "
                         "local disk, NFS, or a FUSE mount such as /Volumes/<catalog>/<schema>/"
                         "<volume>), not to the URL %r" % (os.fspath(path),))
    return os.path.abspath(root)


def default_root():
    """AIR_CHECKPOINT_DIR, for a call that names no directory."""
    root = os.environ.get(CHECKPOINT_DIR_VAR, "")
    if not root:
        raise ValueError("air.data: no checkpoint directory given and %s is not set (air-run "
                         "--checkpoint-dir DIR sets it)" % CHECKPOINT_DIR_VAR)
    return root


def staging_path(path):
    """Where a save of `path` writes before its commit."""
    parent, name = os.path.split(_directory(path))
    return os.path.join(parent, ".%s.partial" % name)


def _marker(path):
    """The commit record of a checkpoint directory, or None."""
    try:
        with open(os.path.join(path, MARKER), "r", encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    # An integer, as _commit writes it; anything else is not our commit record
    # (air-run's reading, core/run/resume.cpp, skips it the same way).
    sequence = record.get("sequence")
    if isinstance(sequence, bool) or not isinstance(sequence, int):
        return None
    return record


def checkpoints(root=None):
    """Complete checkpoints under root (default AIR_CHECKPOINT_DIR), oldest
    first (by commit sequence, then name)."""
    root = _directory(default_root() if root is None else root)
    found = []
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    for name in names:
        if name.startswith("."):
            continue
        path = os.path.join(root, name)
        record = _marker(path) if os.path.isfile(os.path.join(path, METADATA)) else None
        if record is not None:
            found.append((int(record["sequence"]), name, path))
    return [path for _, _, path in sorted(found)]


def latest(root=None):
    """The newest complete checkpoint under root (default
    AIR_CHECKPOINT_DIR), its path, or None."""
    found = checkpoints(root)
    return found[-1] if found else None


def _fsync_directory(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_quietly(path):
    """Renames a directory out of sight, then deletes it: a half-deleted
    checkpoint is never visible under its name."""
    parent, name = os.path.split(path)
    hidden = os.path.join(parent, ".%s.deleting-%s" % (name, uuid.uuid4().hex[:8]))
    try:
        os.rename(path, hidden)
    except FileNotFoundError:
        return
    shutil.rmtree(hidden, ignore_errors=True)


def _air_run_steps():
    """air.steps() of this rank (the committing one: ranks step together),
    or None outside air-run, where nothing counts steps."""
    import sys
    progress = getattr(sys, "_air_run_progress", None)
    return None if progress is None else progress.steps


def _restore_steps(path):
    """Sets air.steps() to the count the checkpoint `path` recorded, so
    that a resumed rank counts on from the step it saved at rather than 0."""
    from air import _progress
    record = _marker(_directory(path))
    steps = None if record is None else record.get("steps")
    if isinstance(steps, int) and not isinstance(steps, bool) and steps >= 0:
        _progress.set_steps(steps)


def _commit(staging, target, sync):
    parent = os.path.dirname(target)
    existing = checkpoints(parent)
    sequence = 1 + max([int(_marker(p)["sequence"]) for p in existing] or [0])
    import torch
    record = {"format": MARKER_FORMAT, "sequence": sequence, "committed_unix": time.time(),
              "torch": torch.__version__}
    steps = _air_run_steps()
    if steps is not None:
        record["steps"] = steps  # load() restores air.steps() from it
    with open(os.path.join(staging, MARKER), "w", encoding="utf-8") as f:
        json.dump(record, f)
        f.write("\n")
        if sync:
            f.flush()
            os.fsync(f.fileno())
    if sync:
        _fsync_directory(staging)
    if os.path.exists(target):
        replaced = os.path.join(parent, ".%s.replaced-%s" % (os.path.basename(target),
                                                             uuid.uuid4().hex[:8]))
        os.rename(target, replaced)
        os.rename(staging, target)
        shutil.rmtree(replaced, ignore_errors=True)
    else:
        os.rename(staging, target)
    if sync:
        _fsync_directory(parent)


def _prune(parent, keep_last):
    for path in checkpoints(parent)[:-keep_last]:
        _remove_quietly(path)


class VolumeWriter(dcp.FileSystemWriter):
    """A DCP StorageWriter for the checkpoint directory `path`:
    ``dcp.save(state_dict, storage_writer=VolumeWriter(path))`` (torch 2) or
    ``save_state_dict(state_dict, VolumeWriter(path))`` (torch 1.13), or
    ``air.data.save(state_dict, path)`` on either.

    The checkpoint appears under `path` complete or not at all (see the
    module). ``keep_last=N`` deletes all but the newest N complete
    checkpoints of the parent directory after the commit. An existing
    directory at `path` that is not a checkpoint is refused; an existing
    checkpoint is replaced. Without `path`, the next
    ``checkpoint-<sequence>`` of AIR_CHECKPOINT_DIR (rank 0's choice, when
    the default process group is initialised).
    """

    def __init__(self, path=None, keep_last=None, sync_files=True):
        target = _directory(_next_default_path(None) if path is None else path)
        if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int)
                                      or keep_last < 1):
            raise ValueError("air.data: keep_last must be an int >= 1 or None, not %r"
                             % (keep_last,))
        if os.path.basename(target).startswith("."):
            raise ValueError("air.data: a checkpoint name must not start with '.' (those are "
                             "hidden work directories): %s" % target)
        if os.path.exists(target) and _marker(target) is None:
            raise FileExistsError("air.data: %s exists and is not a checkpoint written by "
                                  "air.data; refusing to replace it" % target)
        self.target = target
        self.staging = staging_path(target)
        self.keep_last = keep_last
        self._sync = sync_files
        super().__init__(self.staging, single_file_per_rank=True, sync_files=sync_files)

    def reset(self, checkpoint_id=None):
        """torch 2 calls this with dcp.save's checkpoint_id, which must then
        name this writer's own directory."""
        if checkpoint_id is not None and _directory(checkpoint_id) != self.target:
            raise ValueError("air.data: this VolumeWriter writes %s, not checkpoint_id %s"
                             % (self.target, os.fspath(checkpoint_id)))
        parent_reset = getattr(super(), "reset", None)
        if parent_reset is not None:
            parent_reset(None)

    def prepare_global_plan(self, plans):
        # Runs on the coordinator after every rank planned and before any rank
        # writes: the place to clear what a dead earlier save left behind.
        shutil.rmtree(self.staging, ignore_errors=True)
        os.makedirs(self.staging)
        return super().prepare_global_plan(plans)

    def finish(self, metadata, results):
        super().finish(metadata, results)
        # One commit at a time in a directory (air.data.save already holds
        # the lock; a VolumeWriter handed to dcp.save takes it here).
        with _guard.CommitLock(os.path.dirname(self.target)):
            _commit(self.staging, self.target, self._sync)
            if self.keep_last is not None:
                _prune(os.path.dirname(self.target), self.keep_last)


def _readable(path):
    directory = _directory(path)
    if os.path.basename(directory).startswith("."):
        raise ValueError("air.data: %s is the work directory of a save that did not finish, "
                         "not a checkpoint; use air.data.latest(<root>)" % directory)
    if not os.path.isfile(os.path.join(directory, METADATA)):
        raise FileNotFoundError("air.data: %s is not a complete checkpoint (no %s); "
                                "air.data.latest(<root>) finds the newest complete one"
                                % (directory, METADATA))
    return directory


class VolumeReader(dcp.FileSystemReader):
    """A DCP StorageReader for a complete checkpoint directory (one made by
    VolumeWriter, or any DCP FileSystemWriter checkpoint):
    ``dcp.load(state_dict, storage_reader=VolumeReader(path))``, or
    ``air.data.load(state_dict, path)``. A save's unfinished work directory,
    or a directory without DCP metadata, is refused."""

    def __init__(self, path):
        self.target = _readable(path)
        super().__init__(self.target)

    def reset(self, checkpoint_id=None):
        if checkpoint_id is not None:
            self.target = _readable(checkpoint_id)
        parent_reset = getattr(super(), "reset", None)
        if parent_reset is not None:
            parent_reset(self.target if checkpoint_id is not None else None)


def _next_default_path(process_group):
    """<AIR_CHECKPOINT_DIR>/checkpoint-<next sequence>, as rank 0 sees the
    directory: every rank must name the same checkpoint, and another node's
    view of a shared directory may lag."""
    root = _directory(default_root())
    sequences = [int(_marker(p)["sequence"]) for p in checkpoints(root)]
    path = os.path.join(root, "%s%06d" % (DEFAULT_PREFIX, 1 + max(sequences or [0])))
    if not _dcp._no_dist(process_group):
        import torch.distributed as dist
        box = [path]
        dist.broadcast_object_list(box, src=0, group=process_group)
        path = box[0]
    return path


def save(state_dict, path=None, keep_last=None, process_group=None):
    """Saves state_dict (from every rank of the process group; from this
    process alone when none is initialised) as the checkpoint `path`
    (default: the next ``checkpoint-<sequence>`` in AIR_CHECKPOINT_DIR).
    Returns the path.

    Collective: every rank of the process group calls it, each with its own
    state_dict. Calling it on rank 0 alone (``if rank == 0: torch.save``'s
    habit) deadlocks: rank 0 waits in a collective the others never enter.

    The committing rank holds the directory's lock (``.air-checkpoint.lock``)
    from the choice of the name to the commit: another run that shares the
    directory waits, told which run holds it. A disk without room for the
    ranks' tensors is an OSError (ENOSPC) naming the disk, the folder and
    the bytes needed and free, raised before anything is written; a save
    that fails midway leaves no ``.partial`` folder."""
    no_dist = _dcp._no_dist(process_group)
    root = _directory(default_root() if path is None else os.path.dirname(_directory(path)))
    committing = no_dist or _rank(process_group) == 0
    lock = _guard.CommitLock(root) if committing else None
    if lock is not None:
        lock.__enter__()
    try:
        if path is None:
            path = _next_default_path(process_group)
        writer = VolumeWriter(path, keep_last=keep_last)
        _guard.check_space(writer.target, state_dict, process_group, no_dist)
        try:
            _dcp.save(state_dict, writer, process_group=process_group)
        except BaseException as e:
            shutil.rmtree(writer.staging, ignore_errors=True)
            if isinstance(e, Exception) and _guard.ran_out_of_space(e, writer.target):
                raise _guard.no_space_error(writer.target, _guard.state_bytes(state_dict),
                                            _guard.free_bytes(os.path.dirname(writer.target))) from e
            raise
    finally:
        if lock is not None:
            lock.__exit__(None, None, None)
    return writer.target


def _rank(process_group):
    import torch.distributed as dist
    return dist.get_rank(process_group)


def load(state_dict, path=None, process_group=None):
    """Loads the checkpoint `path` (default: AIR_RESUME_FROM, the one air-run
    chose to resume from) into state_dict, in place (tensors are copied into
    the existing ones, so a model's state_dict() loads into the model).
    Returns state_dict.

    Collective, like save(): every rank of the process group calls it.
    Under air-run, air.steps() then goes on from the step count the
    checkpoint recorded when it was saved (a checkpoint saved outside air-run
    recorded none and leaves it as it is)."""
    if path is None:
        path = os.environ.get(RESUME_FROM_VAR, "")
        if not path:
            raise ValueError("air.data: no checkpoint given and %s is not set (air-run sets it "
                             "when --checkpoint-dir holds a complete checkpoint)" % RESUME_FROM_VAR)
    _dcp.load(state_dict, VolumeReader(path), process_group=process_group)
    _restore_steps(path)
    return state_dict
