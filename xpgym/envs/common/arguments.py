"""Type tests for the numeric arguments of env constructors and `reset` options.

An int argument accepts any `numbers.Integral` (Python and NumPy ints) and a number argument
any `numbers.Real`; a `bool` is neither, although Python counts it as an int.

The tests return a plain `bool`, not a `TypeGuard`: a NumPy int is not an `int`, so the
argument keeps its annotated type and the caller converts it (``int(value)``) after the test.
"""

from __future__ import annotations

import numbers

__all__ = ["is_int", "is_number"]


def is_int(value: object) -> bool:
    """Whether `value` is an integer (any `numbers.Integral`) and not a `bool`."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """Whether `value` is a real number (any `numbers.Real`) and not a `bool`."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
