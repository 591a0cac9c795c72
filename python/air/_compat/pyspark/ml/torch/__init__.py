"""air stand-in for pyspark.ml.torch (TorchDistributor only)."""

from air import TorchDistributor

__all__ = ["TorchDistributor"]
