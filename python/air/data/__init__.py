"""air.data: files of a directory or URL for distributed training, and
checkpoints, the counterpart of the product page's data module.

- ``VolumeDataset(path_or_url, pattern="*", shuffle=True, seed=0, decode=None,
  cache=None, cache_dir=None, cache_size=None, drop_last=False, pad=False)``:
  a torch IterableDataset, one sample per file, split across ranks and
  DataLoader workers, read through a node-local cache, resumable mid-epoch
  (``state_dict`` / ``load_state_dict``); ``dataset.loader(...)`` gives a
  ``VolumeLoader`` whose progress is exact with worker processes.
- ``VolumeWriter(path, keep_last=None)`` / ``VolumeReader(path)``: torch
  Distributed Checkpoint storage with an atomic commit; ``latest(root)``,
  ``checkpoints(root)``, ``save(state_dict, path)``, ``load(state_dict, path)``;
  ``save`` and ``load`` are collective: every rank calls them, never rank 0 alone.
- ``VolumeCache``: the cache itself.

Names are imported on first use: ``import air.data`` does not import torch.
``databricks.air.data`` adds the product page's names (``UCVolumeDataset``...).
"""

from air.data import _aliases

__all__ = _aliases.AIR_NAMES


def __getattr__(name):
    value = _aliases.lookup(__name__, name)
    globals()[name] = value  # found once; later look-ups are plain attributes
    return value


def __dir__():
    return sorted(__all__)
