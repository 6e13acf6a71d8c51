"""Old import paths that keep working after a name moved, with a `DeprecationWarning`."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved_names"]


def moved_names(old_module: str, new_homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for `old_module`, whose names in `new_homes` moved.

    Usage, in the old module: ``__getattr__ = moved_names(__name__, {"Name": "new.module"})``.

    Args:
        old_module: The old module's dotted name (for the messages).
        new_homes: Each moved name -> the dotted name of the module that now holds it.

    Returns:
        A function that, for a moved name, warns with `DeprecationWarning` (pointing at the
        caller's line and naming the new import) and returns the object from its new home
        (imported then); for any other name, raises `AttributeError`.
    """
    homes = dict(new_homes)

    def getattr_moved(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        warnings.warn(
            f"{old_module}.{name} moved: import it from {homes[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(homes[name]), name)

    return getattr_moved
