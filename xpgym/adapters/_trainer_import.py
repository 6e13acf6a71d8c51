"""Import a trainer package for an adapter without letting it reconfigure logging.

Some trainers configure the root logger when imported (verl's ``logging_utils`` and
``import gem`` call ``logging.basicConfig``), which would change how every other library
in the process logs. `import_trainer` imports the package (an ImportError names the xpgym
extra to install, see `xpgym.core.optional.import_optional`) and then puts the root
logger's level and handlers back as they were.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from xpgym.core.optional import import_optional

__all__ = ["import_trainer", "root_logging_kept"]


@contextmanager
def root_logging_kept() -> Iterator[None]:
    """Restore the root logger's level and handlers when the block ends."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers


def import_trainer(module: str, *, adapter: str, install: str) -> ModuleType:
    """``import_optional(module, ...)`` with the root logger left as it was."""
    with root_logging_kept():
        return import_optional(module, needed_by=f"xpgym.adapters.{adapter}", install=install)
