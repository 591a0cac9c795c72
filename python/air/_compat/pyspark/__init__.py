"""Minimal stand-in for pyspark (provided by air): only
``pyspark.ml.torch.distributor.TorchDistributor`` is available, backed by
air-run. Installed real pyspark is never shadowed unless AIR_FORCE_COMPAT=1."""

__air_compat__ = True
