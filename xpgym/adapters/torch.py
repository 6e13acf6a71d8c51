"""Deprecated path of the reference trainer: it moved to `xpgym.reference`.

`xpgym.reference.trainer` holds `TrainerConfig`, `Trainer`, `Batch` and `train`;
`xpgym.reference.losses` the per-token losses and their aggregation. Every name this module
used to export still resolves here, from its new home, with a `DeprecationWarning` naming
that home. This path will be removed.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_HOMES = ("xpgym.reference.trainer", "xpgym.reference.losses")


def __getattr__(name: str) -> Any:
    """The public name `name` of a new home, with a `DeprecationWarning`."""
    for home in _HOMES:
        module = importlib.import_module(home)
        if name in module.__all__:
            warnings.warn(
                f"{__name__}.{name} moved to {home}.{name}; import it from there",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
