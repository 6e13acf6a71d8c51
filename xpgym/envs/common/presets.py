"""Difficulty presets: ``None``, a named preset, or ``"random"`` (`resolve_presets`); a
preset with the caller's keyword overrides put in (`override_preset`); and `PresetEnv`, the
base of the games whose settings come from a preset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from xpgym.core.env import Env
from xpgym.core.registry import register
from xpgym.envs.common.arguments import is_int

__all__ = ["PresetEnv", "override_preset", "register_presets", "resolve_presets"]

S = TypeVar("S")
N = TypeVar("N", bound=NamedTuple)
P = TypeVar("P")


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
        return {name: preset for name, preset in presets.items()}
    raise ValueError(
        f"difficulty must be None, 'random' or one of {sorted(presets)}, got {difficulty!r}"
    )


def register_presets(
    category: str, name: str, entry_point: str, default: str, easy: str, hard: str
) -> None:
    """Register ``<category>:<name>-v0`` and its ``-easy``, ``-hard`` and ``-random`` ids.

    The ``-random`` id draws easy or hard at every reset; the other arguments are the ids'
    one-line descriptions.
    """
    base = f"{category}:{name}-v0"
    register(base, entry_point, description=default)
    register(f"{base}-easy", entry_point, difficulty="easy", description=easy)
    register(f"{base}-hard", entry_point, difficulty="hard", description=hard)
    register(
        f"{base}-random",
        entry_point,
        difficulty="random",
        description=f"{name}; easy or hard drawn at every reset.",
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
        if not is_int(value):
            raise TypeError(f"{owner}: {name} must be an int, got {value!r}")
    return preset._make(map(int, merged))


class PresetEnv(Env[str], Generic[P]):
    """Base of the games whose settings come from a difficulty preset; owns the preset skeleton.

    A preset `P` is what a game needs for one difficulty: its checked settings (a
    `NamedTuple`), and for the word games also the candidate words that fit them. The base:

    * keeps the game's presets by name (``{None: default}``, ``{name: preset}``, or every
      preset for ``difficulty="random"``, as `resolve_presets` gives them) and applies the
      first at construction, so the game's settings exist before the first `reset()`;
    * in `reset()`, after reseeding `np_random`, draws this episode's preset when there are
      several (``"random"``): one ``np_random.integers(number of presets)``, before anything
      the game draws. A game's `reset` calls ``super().reset(seed=seed)`` first, as with
      `Env`; this base returns ``("", {})``, for the game to replace;
    * snapshots ``{"choice": this episode's preset index, **game state, "rng": RNG state}``
      in `get_state()` and restores the preset, the game state and the RNG in `set_state()`.

    Subclasses implement `_apply_preset` (put a preset's settings into attributes),
    `_episode_state` and `_restore_episode_state` (the game's own part of a snapshot).

    Args:
        difficulty: What the caller asked for (kept as `difficulty`).
        presets: The presets this env can use, by name (`None` without a difficulty); the
            game has already checked them.

    Attributes:
        difficulty: `None`, a preset name or ``"random"``, as given.
        episode_difficulty: This episode's preset name (`None` without a difficulty; for
            ``"random"``, the preset drawn at the last reset, the first one before).
    """

    def __init__(self, difficulty: str | None, presets: Mapping[str | None, P]) -> None:
        self.difficulty = difficulty
        self._presets = list(presets.items())
        self._use_preset(0)

    def _use_preset(self, index: int) -> None:
        self._preset_index = index
        self.episode_difficulty, preset = self._presets[index]
        self._apply_preset(preset)

    def _apply_preset(self, preset: P) -> None:
        """Set the game's settings attributes from `preset` (a new episode starts after)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _apply_preset()")

    def _episode_state(self) -> dict[str, Any]:
        """The game's own part of a `get_state()` snapshot (fresh copies, JSON-like)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _episode_state()")

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore the game's own part of a snapshot; this episode's preset is applied."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement _restore_episode_state()"
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Reseed `np_random` and, with several presets, draw this episode's from it."""
        super().reset(seed=seed)
        if len(self._presets) > 1:
            self._use_preset(int(self.np_random.integers(len(self._presets))))
        return "", {}

    def get_state(self) -> dict[str, Any]:
        """Snapshot: this episode's preset, the game's state and the RNG state (a fresh dict)."""
        return {
            "choice": self._preset_index,
            **self._episode_state(),
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot taken from an env with the same arguments."""
        self._use_preset(state["choice"])
        self._restore_episode_state(state)
        self.np_random.bit_generator.state = state["rng"]
