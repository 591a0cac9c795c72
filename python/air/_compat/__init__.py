"""Stand-in modules put on sys.path by ``python -m air.torch_distributor``.

Not imported as ``air._compat``: its *directory* goes on sys.path so that
``import pyspark.ml.torch.distributor`` in an unmodified TorchDistributor script
resolves to the air drop-in when pyspark is not installed.
"""
