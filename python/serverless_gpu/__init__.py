"""``serverless_gpu``: the deprecated import path of the product page.

Importing it emits a FutureWarning naming the replacement (``databricks.air``,
or ``air``) and gives the same objects: ``distributed`` (whose ``gpus`` and
``gpu_type`` arguments are the deprecated names of ``num_accelerators`` and
``accelerator_type``), ``ray_init``, ``GPUType`` and ``AcceleratorType``.
"""

import warnings

import air as _air
from air import *  # noqa: F401,F403  (the alias is the point)
from air import __version__  # noqa: F401

DEPRECATION = ("serverless_gpu is deprecated and gets no new features: import from databricks.air "
               "instead (from databricks.air import distributed, ray_init), rename gpus to "
               "num_accelerators and gpu_type to accelerator_type, and use the "
               "GPU_<n>x<MODEL> type values (e.g. 'GPU_8xH100' for 'H100')")

warnings.warn(DEPRECATION, FutureWarning, stacklevel=2)

__all__ = list(_air.__all__)
