"""Environment variables set for a block of code (and the processes it starts): the episode
log of the end-to-end runs and the benchmark, and a trainer's launcher variables in layer 3."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["set_environment"]


@contextmanager
def set_environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set the environment variables of `values` for the block (subprocesses see them; a
    None value removes the variable for the block); on exit each gets its earlier value
    back, or is removed if it had none."""
    before = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
