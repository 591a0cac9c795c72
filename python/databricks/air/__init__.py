"""``databricks.air``: the product page's import path for the air package.

``from databricks.air import distributed`` gives ``air.distributed``; every
public name of ``air`` is re-exported as the same object. ``databricks`` is a
namespace package (no ``__init__.py``), so this coexists with other
distributions that put modules under ``databricks`` (e.g. the Databricks SDK's
``databricks.sdk``).
"""

import air as _air
from air import *  # noqa: F401,F403  (the alias is the point)
from air import __version__  # noqa: F401

__all__ = list(_air.__all__)
