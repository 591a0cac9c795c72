"""One table of the air.data names: where each lives, and the product page's
Unity Catalog names for them. The public modules (air.data,
databricks.air.data, serverless_gpu.data) look names up here on first use."""

import importlib

# public name -> submodule of air.data that defines it
AIR_NAMES_TO_MODULE = {
    "VolumeDataset": "air.data._dataset",
    "VolumeLoader": "air.data._dataset",
    "VolumeCache": "air.data._cache",
    "VolumeWriter": "air.data._checkpoint",
    "VolumeReader": "air.data._checkpoint",
    "checkpoints": "air.data._checkpoint",
    "latest": "air.data._checkpoint",
    "save": "air.data._checkpoint",
    "load": "air.data._checkpoint",
}
AIR_NAMES = list(AIR_NAMES_TO_MODULE)

# the product page's name -> air.data's
UC_ALIASES = {
    "UCVolumeDataset": "VolumeDataset",
    "UCVolumeWriter": "VolumeWriter",
    "UCVolumeReader": "VolumeReader",
}


def exported_names():
    """Names of the alias modules: air.data's and the UC names."""
    return AIR_NAMES + list(UC_ALIASES)


def lookup(module_name, name):
    """The object `name` of module `module_name` (AttributeError as usual)."""
    if module_name != "air.data":
        name = UC_ALIASES.get(name, name)
    where = AIR_NAMES_TO_MODULE.get(name)
    if where is None:
        raise AttributeError("module %r has no attribute %r" % (module_name, name))
    return getattr(importlib.import_module(where), name)
