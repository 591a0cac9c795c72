"""air stand-in for pyspark.ml (TorchDistributor only)."""
