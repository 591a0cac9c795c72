"""``databricks.air.data``: ``air.data`` under the product page's path, with
its names ``UCVolumeDataset``, ``UCVolumeWriter`` and ``UCVolumeReader``.

The UC names are aliases of ``air.data.VolumeDataset``, ``VolumeWriter`` and
``VolumeReader``: they take any directory, ``file://`` URL or fsspec URL (a
Unity Catalog volume is the directory ``/Volumes/<catalog>/<schema>/<volume>``).
Names are looked up in ``air.data`` on first use, so importing this module does
not import torch.
"""

from air.data import _aliases

UC_ALIASES = _aliases.UC_ALIASES
__all__ = _aliases.exported_names()


def __getattr__(name):
    value = _aliases.lookup(__name__, name)
    globals()[name] = value  # found once; later look-ups are plain attributes
    return value


def __dir__():
    return sorted(__all__)
