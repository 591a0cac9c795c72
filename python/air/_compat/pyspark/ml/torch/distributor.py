"""air stand-in for pyspark.ml.torch.distributor: TorchDistributor runs on air-run."""

from air import TorchDistributor

__all__ = ["TorchDistributor"]
