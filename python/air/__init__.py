"""air: run a Python function once per accelerator through the `air-run` launcher.

The Python front-end of air-run. It brings the Databricks AI Runtime
``@distributed`` experience, and a drop-in ``TorchDistributor``, to any Linux
machine::

    from air import distributed

    @distributed(num_accelerators=2)
    def train(lr):
        import os
        return int(os.environ["RANK"])

    train.distributed(lr=1e-3)      # -> [0, 1], one value per rank, in rank order

The same API is importable as ``databricks.air`` (the product page's path)
and ``serverless_gpu`` (its deprecated path, with a FutureWarning); air.data
holds the sharded streaming dataset and the checkpoint writer and reader.
See docs/python.md in the repository for the full contract.
"""

__version__ = "0.1.0"

from air._errors import DistributedError, DistributedTimeout, SerializationError
from air._report import report
from air._progress import set_steps, should_stop, step, steps, stop_deadline, stop_step
from air._types import AcceleratorType, GPUType
from air._decorator import DistributedFunction, distributed
from air._ray import RayNotSupportedError, ray_init
from air._tdist import TorchDistributor

__all__ = [
    "__version__",
    "AcceleratorType",
    "GPUType",
    "distributed",
    "DistributedFunction",
    "DistributedError",
    "DistributedTimeout",
    "SerializationError",
    "TorchDistributor",
    "RayNotSupportedError",
    "ray_init",
    "report",
    "set_steps",
    "should_stop",
    "step",
    "steps",
    "stop_deadline",
    "stop_step",
]
