"""The registered description of every preset id states its preset's numbers.

A game's presets live in its module (`DIFFICULTIES` and the default settings); the one-line
descriptions registered for ``<id>``, ``<id>-easy`` and ``<id>-hard`` repeat their numbers for
listings. This checks each description against the preset it names, so neither can change
alone. ``toolgym:`` ids are not covered here: their sizes are per-module tables of another
shape (`xpgym.envs.toolgym`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest

from xpgym.core.registry import list_envs, spec

Facts = Callable[[Any], list[str]]


def turns(settings: Any) -> str:
    return f"{settings.max_turns} turns"


def square(size: int) -> str:
    return f"{size}x{size}"


def rooms(low: int, high: int, words: dict[int, str] | None = None) -> str:
    """``"one room"``, ``"4 rooms"``, ``"2-3 rooms"``; with `words`, the count as a word."""
    if low != high:
        return f"{low}-{high} rooms"
    if low == 1:
        return "one room"
    return f"{(words or {}).get(low, low)} rooms"


def directions(names: tuple[str, ...]) -> str:
    return "(all 8 directions)" if len(names) == 8 else f"({', '.join(names)})"


# The facts each description must state, read from its preset.
FACTS: dict[str, Facts] = {
    "game:GuessTheNumber": lambda s: [f"{s.min_number}..{s.max_number}", turns(s)],
    "game:Mastermind": lambda s: [
        f"{s.code_length}-peg",
        f"colours 1..{s.num_colors}",
        turns(s),
    ],
    "game:Minesweeper": lambda s: [f"{s.rows}x{s.cols} grid", f"{s.mines} mines", turns(s)],
    "game:TowerOfHanoi": lambda s: [
        f"{s.num_disks}-disk",
        turns(s),
        f"optimum {2**s.num_disks - 1}",
    ],
    "game:Sudoku": lambda s: [f"Sudoku {square(s.size)}", f"{s.givens} givens", turns(s)],
    "game:Game2048": lambda s: [f"{square(s.size)} board", f"the {s.target} tile", turns(s)],
    "game:Wordle": lambda s: [f"{s.word_length}-letter word", turns(s)],
    "game:Hangman": lambda s: [
        f"{s.min_length}-{s.max_length} letter word",
        f"{s.lives} lives",
        turns(s),
    ],
    "game:FifteenPuzzle": lambda s: [
        f"{square(s.size)} sliding puzzle",
        f"scrambled by {s.scramble_moves} moves",
        turns(s),
    ],
    "game:Sokoban": lambda s: [f"push {s.num_boxes} box", f"{square(s.size)} room", turns(s)],
    "game:WordSearch": lambda s: [
        f"{s.num_words} hidden words {directions(s.directions)}",
        f"{square(s.size)} letter grid",
        turns(s),
    ],
    "game:Crosswords": lambda s: [
        f"{s.num_words} words ({s.min_length}-{s.max_length} letters)",
        "anagram clues and first letters" if s.reveal_first else "anagram clues only",
        turns(s),
    ],
    "math:Arithmetic": lambda s: [
        f"{s.min_operands}-{s.max_operands} integers in 1..{s.max_value}",
        "or ax + b = cx + d." if s.two_sided_equations else "or ax + b = c.",
    ],
    "vision:CountShapes": lambda s: [
        f"a picture of {s.min_shapes}-{s.max_shapes}",
        f"{s.num_colors} colours",
        "by colour, kind or both" if s.any_forms else "of one colour and kind",
    ],
    "world:Crafting": lambda s: [
        f"depth-{s.depth}",
        f"{s.distractors} distractor",
        *([f"{s.tags} generic ingredient"] if s.tags else []),
        turns(s),
    ],
    "world:GridWorld": lambda s: [rooms(s.rooms, s.rooms, {2: "two", 3: "three"}), turns(s)],
    "world:ScienceLab": lambda s: [rooms(s.min_rooms, s.max_rooms), turns(s)],
}

PRESET_IDS = [
    (family, suffix) for family in sorted(FACTS) for suffix in ("-v0", "-v0-easy", "-v0-hard")
]


def preset_of(env_id: str) -> Any:
    """The settings the id's env is built with: `DIFFICULTIES[difficulty]`, or the module's
    default settings for the id without a difficulty."""
    env_spec = spec(env_id)
    module = importlib.import_module(env_spec.entry_point_name().partition(":")[0])
    difficulty = env_spec.kwargs.get("difficulty")
    return module.DIFFICULTIES[difficulty] if difficulty else module._DEFAULT


@pytest.mark.parametrize(("family", "suffix"), PRESET_IDS)
def test_the_description_states_the_presets_numbers(family, suffix):
    env_id = family + suffix
    description = spec(env_id).description
    missing = [fact for fact in FACTS[family](preset_of(env_id)) if fact not in description]
    assert missing == [], f"{env_id}: {description!r} does not say {missing}"


def test_every_preset_family_outside_toolgym_is_checked():
    families = {
        env_id.removesuffix("-v0-easy")
        for env_id in list_envs()
        if env_id.endswith("-v0-easy") and not env_id.startswith("toolgym:")
    }
    assert families == set(FACTS)
