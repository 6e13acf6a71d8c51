"""Old import paths that keep working after a name moved, with a `DeprecationWarning`.

A module whose contents moved keeps only its docstring and::

    __getattr__ = moved_names(__name__, {"last_tagged": "xpgym.envs.common.answers"})

Every access to a moved name (``from old import name`` or ``old.name``) returns the object
from its new home and warns with `DeprecationWarning`, naming the new import path.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved_names"]


def moved_names(old_module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for `old_module` that serves each name of `homes` from
    its new home.

    Args:
        old_module: The old module's ``__name__`` (for the messages).
        homes: Old name -> new home, either ``"package.module"`` (same name there) or
            ``"package.module:new_name"`` (the name changed too).

    Returns:
        The function to assign to the old module's ``__getattr__``. For a moved name it warns
        with `DeprecationWarning` (pointing at the caller's line and naming the new import)
        and returns the object from its new home, imported then; for any other name it raises
        `AttributeError`.
    """
    targets = {
        name: (home.partition(":")[0], home.partition(":")[2] or name)
        for name, home in homes.items()
    }

    def getattr_moved(name: str) -> Any:
        if name not in targets:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        module, new_name = targets[name]
        warnings.warn(
            f"{old_module}.{name} moved to {module}.{new_name}; import it from {module}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), new_name)

    return getattr_moved
