"""Difficulty presets shared by the games: ``None``, a named preset, or ``"random"``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

__all__ = ["resolve_presets"]

S = TypeVar("S")


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
