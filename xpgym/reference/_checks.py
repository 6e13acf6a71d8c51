"""Argument checks shared by the reference trainer's config and its loss functions.

Each raises `ValueError` naming the argument and the value it got.
"""

from __future__ import annotations

import difflib
import math
from typing import Any


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    """`value` is one of `choices`; otherwise the error suggests the closest choice."""
    if value not in choices:
        close = difflib.get_close_matches(str(value), choices, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown {name} {value!r}; choose one of {choices}{hint}")


def check_positive_int(name: str, value: Any) -> None:
    """`value` is an ``int`` (not a ``bool``) of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def check_positive(name: str, value: Any) -> None:
    """`value` is a finite ``int`` or ``float`` (not a ``bool``) above 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
