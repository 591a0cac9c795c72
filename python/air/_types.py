"""The accelerator type vocabularies of the product page, as enums.

``AcceleratorType`` holds the values of ``databricks.air``; ``GPUType`` the
short values of the deprecated ``serverless_gpu`` package. Both are ``str``
enums, so a member works wherever a type string does (``@distributed``'s
``accelerator_type`` / ``gpu_type``); ``accelerator_text`` turns either, or a
plain string, into the text that air-run's ``--accelerator-type`` takes.
"""

import enum


class AcceleratorType(str, enum.Enum):
    """A whole node's accelerators, ``GPU_<n>x<MODEL>``: the values the
    product page lists, plus ``CPU`` (air-run's CPU ranks). Any other
    ``GPU_<n>x<MODEL>`` string (e.g. ``"GPU_2xH200"``) is accepted as text."""

    GPU_1xA10 = "GPU_1xA10"
    GPU_1xH100 = "GPU_1xH100"
    GPU_8xH100 = "GPU_8xH100"
    GPU_8xB300 = "GPU_8xB300"
    CPU = "CPU"

    def __str__(self):
        return self.value


class GPUType(str, enum.Enum):
    """serverless_gpu's GPU models, deprecated (a FutureWarning when used).
    A bare model checks the GPU family only: the rank count comes from
    ``num_accelerators`` (``gpus``), else every GPU of that family."""

    A10 = "A10"
    H100 = "H100"
    B300 = "B300"

    def __str__(self):
        return self.value


# serverless_gpu's short values, upper case; databricks.air spells them GPU_<n>x<MODEL>.
LEGACY_TYPES = tuple(member.value for member in GPUType)


def accelerator_text(value):
    """The type as air-run's text: None stays None; a string is kept; an enum
    member (these, or any object with a string ``value`` or ``name``) gives
    that string."""
    if value is None:
        return None
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str):
        return value
    # Enum-like objects of other packages (an old serverless_gpu GPUType...).
    for attribute in ("value", "name"):
        inner = getattr(value, attribute, None)
        if isinstance(inner, str):
            return inner
    raise TypeError("accelerator_type must be a string such as 'GPU_8xH100' or 'CPU', or an "
                    "air.AcceleratorType, not %r" % (value,))
