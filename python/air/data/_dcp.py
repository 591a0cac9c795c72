"""torch Distributed Checkpoint (DCP), whichever way this torch provides it.

torch >= 2.0 has ``torch.distributed.checkpoint`` (``save`` / ``load``).
torch 1.13 has it only as ``torch.distributed._shard.checkpoint``
(``save_state_dict`` / ``load_state_dict``), and that package cannot be
imported on Python >= 3.11: one of its dataclasses,
``ShardedTensorMetadata``, declares ``field(default=TensorProperties())``,
and Python 3.11 refuses a default whose class is unhashable (a mutable
default). Later torch releases changed that line to
``field(default_factory=TensorProperties)``; ``import_dcp()`` makes the same
one-line change while that one module is imported (an import hook that
compiles the patched source, without writing a .pyc), and only when the
unchanged line is there.
"""

import importlib.abc
import importlib.machinery
import inspect
import sys

PATCHED_MODULE = "torch.distributed._shard.sharded_tensor.metadata"
BROKEN_TEXT = "field(default=TensorProperties())"
FIXED_TEXT = "field(default_factory=TensorProperties)"


class _PatchedLoader(importlib.machinery.SourceFileLoader):
    """Loads the module from its source with BROKEN_TEXT replaced."""

    def get_code(self, fullname):
        # Compiled here, never cached: the patched code must not land in
        # torch's __pycache__.
        source = self.get_source(fullname)
        if source.count(BROKEN_TEXT) != 1:
            raise ImportError("air.data: %s does not hold the line air.data knows how to fix (%s); "
                              "this torch needs another workaround" % (self.path, BROKEN_TEXT))
        patched = source.replace(BROKEN_TEXT, FIXED_TEXT)
        return compile(patched, self.path, "exec", dont_inherit=True)


class _PatchFinder(importlib.abc.MetaPathFinder):
    """Finds PATCHED_MODULE as the regular finder does, with _PatchedLoader."""

    def find_spec(self, fullname, path, target=None):
        if fullname != PATCHED_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        with open(spec.origin, "r", encoding="utf-8") as f:
            if BROKEN_TEXT not in f.read():
                return spec  # a torch that needs no fix
        spec.loader = _PatchedLoader(spec.loader.name, spec.loader.path)
        return spec


def needs_patch():
    """True on torch 1.x under Python >= 3.11, where the import fails unfixed."""
    import torch
    major = int(torch.__version__.split(".", 1)[0])
    return major < 2 and sys.version_info >= (3, 11)


_dcp = None


def import_dcp():
    """The DCP module: torch.distributed.checkpoint, or torch 1.13's
    torch.distributed._shard.checkpoint (patched on Python >= 3.11)."""
    global _dcp
    if _dcp is not None:
        return _dcp
    try:
        import torch.distributed.checkpoint as dcp
        _dcp = dcp
        return dcp
    except ImportError:
        pass
    if needs_patch() and PATCHED_MODULE not in sys.modules:
        finder = _PatchFinder()
        sys.meta_path.insert(0, finder)
        try:
            import torch.distributed._shard.checkpoint as dcp
        finally:
            sys.meta_path.remove(finder)
    else:
        import torch.distributed._shard.checkpoint as dcp
    _dcp = dcp
    return dcp


def _no_dist(process_group):
    import torch.distributed as dist
    return process_group is None and not (dist.is_available() and dist.is_initialized())


def save(state_dict, storage_writer, process_group=None):
    """dcp.save (torch 2) or dcp.save_state_dict (torch 1.13) with this writer.
    Without an initialised process group it saves from this process alone."""
    dcp = import_dcp()
    no_dist = _no_dist(process_group)
    if hasattr(dcp, "save"):
        kwargs = {"storage_writer": storage_writer, "process_group": process_group}
        if no_dist and "no_dist" in inspect.signature(dcp.save).parameters:
            kwargs["no_dist"] = True
        return dcp.save(state_dict, **kwargs)
    return dcp.save_state_dict(state_dict, storage_writer, process_group=process_group,
                               no_dist=no_dist)


def load(state_dict, storage_reader, process_group=None):
    """dcp.load (torch 2) or dcp.load_state_dict (torch 1.13), in place into
    state_dict."""
    dcp = import_dcp()
    no_dist = _no_dist(process_group)
    if hasattr(dcp, "load"):
        kwargs = {"storage_reader": storage_reader, "process_group": process_group}
        if no_dist and "no_dist" in inspect.signature(dcp.load).parameters:
            kwargs["no_dist"] = True
        return dcp.load(state_dict, **kwargs)
    return dcp.load_state_dict(state_dict, storage_reader, process_group=process_group,
                               no_dist=no_dist)
