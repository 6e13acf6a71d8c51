"""Import an optional dependency, or fail with an error that says how to install it."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["headless_pyplot", "import_optional"]


def import_optional(module: str, *, needed_by: str, install: str) -> ModuleType:
    """Import `module`; if it is missing, raise `ImportError` naming what needs it and how
    to install it, e.g. ``import_optional("ray", needed_by="RayVectorEnv",
    install='pip install "xpgym[ray]"')``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{needed_by} needs {module}; install it with {install}") from exc


def headless_pyplot(*, needed_by: str, install: str) -> ModuleType:
    """``matplotlib.pyplot`` on the file-only ``Agg`` backend (no display needed), imported
    through `import_optional` (same error when matplotlib is missing)."""
    matplotlib = import_optional("matplotlib", needed_by=needed_by, install=install)
    matplotlib.use("Agg")
    return importlib.import_module("matplotlib.pyplot")
