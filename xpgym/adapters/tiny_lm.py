"""Deprecated path of the tiny model builder: it moved to `xpgym.reference.tiny_model`.

Every name this module used to export still resolves here, from its new home, with a
`DeprecationWarning` naming that home. This path will be removed.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_HOME = "xpgym.reference.tiny_model"


def __getattr__(name: str) -> Any:
    """The public name `name` of the new home, with a `DeprecationWarning`."""
    module = importlib.import_module(_HOME)
    if name not in module.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"{__name__}.{name} moved to {_HOME}.{name}; import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(module, name)
