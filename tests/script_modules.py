"""Scripts under ``scripts/`` loaded as modules, for the tests of their parts."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


@contextlib.contextmanager
def script_module(name: str) -> Iterator[ModuleType]:
    """``scripts/<name>.py`` as module `name`, registered in `sys.modules` while in use
    (dataclasses look their module up while defining) and removed after."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]
