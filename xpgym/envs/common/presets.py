"""Difficulty presets shared by the games: ``None``, a named preset, or ``"random"``; and a
preset with the caller's keyword overrides put in."""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

__all__ = ["override_preset", "resolve_presets"]

S = TypeVar("S")
N = TypeVar("N", bound=NamedTuple)


def resolve_presets(
    difficulty: str | None, presets: Mapping[str, S], default: S
) -> dict[str | None, S]:
    """The presets a game can use for `difficulty`, by name.

    ``None`` gives ``{None: default}``; a preset name gives that preset alone; ``"random"``
    gives every preset (the game draws one at each reset from its `np_random`).

    Raises:
        ValueError: `difficulty` is none of these, with the valid choices.
    """
    if difficulty is None:
        return {None: default}
    if difficulty in presets:
        return {difficulty: presets[difficulty]}
    if difficulty == "random":
        return dict(presets)
    raise ValueError(
        f"difficulty must be None, 'random' or one of {sorted(presets)}, got {difficulty!r}"
    )


def override_preset(preset: N, given: Sequence[Any], owner: str) -> N:
    """`preset` (a NamedTuple of ints) with every non-``None`` value of `given` put in.

    Args:
        preset: The preset's settings.
        given: One value or ``None`` (keep the preset's) per field, in field order.
        owner: The env's class name, for error messages.

    Returns:
        The settings, every field an `int`.

    Raises:
        TypeError: a value is not an int (bools are refused too), naming the field.
    """
    merged = [
        default if value is None else value for default, value in zip(preset, given, strict=True)
    ]
    for name, value in zip(preset._fields, merged, strict=True):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{owner}: {name} must be an int, got {value!r}")
    return type(preset)(*map(int, merged))
