"""Running a trainer's own code here: its installed version (`package_version`), empty
stand-ins for the GPU-only modules its packages import at the top (`stand_ins`), and the error
that says it cannot run here (`NotRunnableError`); whether a ROLL checkout imports
(`roll_importable`, ROLL being git-only). Layers 1 and 3 use them, the end-to-end runs, and
the adapter and recipe tests that import a trainer's code.

OpenRLHF's experience maker imports ``flash_attn``, ``deepspeed`` and ``vllm``; RL2's
algorithms import ``wandb`` (for logging). None of the code the parity check calls uses
them. `stand_ins` puts an empty module in ``sys.modules`` for each one that is missing
(every attribute of it is a new empty class, enough for ``from x import Y`` at import time),
and on exit removes the stand-ins and every module of the given trainer packages imported
inside the block (the ones that hold references to stand-ins), from ``sys.modules`` and from
their parent packages' attributes, so nothing outside the block sees a stand-in. Other
modules imported on the way (torch internals) stay: importing those twice breaks them.
Modules that are installed are used as they are.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from typing import Any

__all__ = [
    "ROLL_NOT_IMPORTABLE",
    "NotRunnableError",
    "check_pins",
    "package_version",
    "roll_importable",
    "stand_ins",
]

ROLL_NOT_IMPORTABLE = (
    "ROLL is git-only: put a checkout on PYTHONPATH (git clone https://github.com/alibaba/ROLL "
    "<dir>; PYTHONPATH=<dir> python -m parity.update)"
)
"""What `NotRunnableError` says where `roll_importable` is False."""


def roll_importable() -> bool:
    """Whether ROLL's agentic package imports here (a checkout on ``PYTHONPATH``); PyPI's
    unrelated ``roll`` does not count."""
    try:
        return importlib.util.find_spec("roll.pipeline.agentic") is not None
    except ModuleNotFoundError:
        return False


class NotRunnableError(Exception):
    """The trainer's code cannot run this check here (it does not import, or cannot express
    the case); the message says why. Reported as ``not runnable``, never as a failure."""


def package_version(distribution: str) -> str:
    """The installed version of `distribution`, or ``"not installed"``."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def check_pins(pins: Mapping[str, str], harness: str) -> dict[str, str]:
    """The installed versions of `pins`' distributions, for the test harness `harness`.

    Raises:
        RuntimeError: one is missing or not at its pinned version (names every mismatch).
    """
    found = {name: package_version(name) for name in pins}
    wrong = [
        f"{name}=={pinned} (found {found[name]})"
        for name, pinned in pins.items()
        if found[name] != pinned
    ]
    if wrong:
        raise RuntimeError(
            f"{harness} is a test harness pinned to exact versions; install "
            + ", ".join(wrong)
            + " (scripts/setup.sh installs them)"
        )
    return found


class _StandIn(types.ModuleType):
    """An empty module whose every public attribute is a new empty class."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {})


@contextmanager
def stand_ins(names: Sequence[str], packages: Sequence[str]) -> Iterator[list[str]]:
    """Make `names` importable for the duration of the block.

    Args:
        names: Modules to stand in for where missing.
        packages: Top-level packages whose modules imported in the block are removed at its
            end (the trainer's own, e.g. ``("openrlhf",)``).

    Yields:
        The names that were missing and got a stand-in (for the report).
    """
    before = set(sys.modules)
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            module = _StandIn(name)
            module.__spec__ = importlib.machinery.ModuleSpec(name, None)
            module.__path__ = []
            sys.modules[name] = module
            missing.append(name)
    try:
        yield missing
    finally:
        owners = set(packages) | {name.split(".")[0] for name in missing}
        for name in set(sys.modules) - before:
            if name.split(".")[0] in owners:
                _forget(name)


def _forget(name: str) -> None:
    """Remove module `name` from ``sys.modules`` and from its parent package's attributes (a
    parent imported before the block would otherwise keep serving the removed module to
    ``from parent import name`` and to attribute access)."""
    module = sys.modules.pop(name)
    parent_name, _, child = name.rpartition(".")
    parent = sys.modules.get(parent_name)
    if parent is not None and getattr(parent, child, None) is module:
        delattr(parent, child)
