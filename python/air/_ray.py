"""``ray_init``: the product page's Ray entry point, which air does not provide."""


class RayNotSupportedError(NotImplementedError):
    """Raised by ``air.ray_init``: air launches torch-style ranks through
    air-run and has no Ray integration."""


def ray_init(*args, **kwargs):
    """Always raises RayNotSupportedError (a NotImplementedError).

    Databricks' ``ray_init`` starts a Ray cluster on the serverless GPU pool.
    air has no Ray integration: it runs one process per accelerator through
    air-run (``@distributed``), with RANK / WORLD_SIZE / MASTER_ADDR set as
    torchrun does. To use Ray anyway, install it and call ``ray.init()``
    yourself on this machine.
    """
    raise RayNotSupportedError(
        "ray_init is not supported: air has no Ray integration (it launches one process per "
        "accelerator through air-run, as torchrun does, and starts no Ray cluster). Use "
        "@distributed for the training function, or install Ray and call ray.init() yourself")
