"""Command-line flags from a dataclass, for the single-file recipes.

Every field ``foo_bar`` of the dataclass becomes ``--foo-bar``; its default is the field's
default and its type the default's type. A `bool` field defaults to its value and
``--foo-bar`` turns it on (``action="store_true"``). Fields must have plain defaults (no
``default_factory``).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any, TypeVar

__all__ = ["parse_dataclass_args"]

T = TypeVar("T")


def parse_dataclass_args(cls: type[T], description: str, argv: Sequence[str] | None = None) -> T:
    """Parse `argv` (default: ``sys.argv[1:]``) into an instance of the dataclass `cls`.

    Raises:
        TypeError: `cls` is not a dataclass, or a field has no plain default.
        SystemExit: bad flags (argparse's usage error, exit status 2) or ``--help``.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    parser = argparse.ArgumentParser(description=description)
    for field in dataclasses.fields(cls):
        if field.default is dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{field.name} needs a plain default to be a flag")
        default: Any = field.default
        flag = f"--{field.name.replace('_', '-')}"
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true", default=default)
        else:
            parser.add_argument(flag, type=type(default), default=default)
    return cls(**vars(parser.parse_args(argv)))
