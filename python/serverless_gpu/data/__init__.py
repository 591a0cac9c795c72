"""``serverless_gpu.data``: the deprecated path of ``databricks.air.data``
(``UCVolumeDataset``, ``UCVolumeWriter``, ``UCVolumeReader`` and the ``air.data``
names). Importing it imports ``serverless_gpu``, which emits the FutureWarning."""

from air.data import _aliases

UC_ALIASES = _aliases.UC_ALIASES
__all__ = _aliases.exported_names()


def __getattr__(name):
    value = _aliases.lookup(__name__, name)
    globals()[name] = value  # found once; later look-ups are plain attributes
    return value


def __dir__():
    return sorted(__all__)
