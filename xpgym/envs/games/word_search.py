r"""WordSearch: find the listed words hidden in a square grid of letters.

Puzzle generation (all randomness from `np_random`):

1. ``num_words`` distinct words are drawn from the word list (by default the shipped
   ``xpgym/data/words_en.jsonl``): words of at most ``size`` letters that are not
   palindromes (a palindrome reads the same from both ends, so its position would be
   ambiguous).
2. Longest first, each word is placed at a start cell and direction drawn uniformly from
   every placement that fits: inside the grid, in one of the allowed ``directions``, and
   crossing earlier words only where the letters agree.
3. The empty cells get uniform random letters ``a``-``z``.
4. The grid is kept only if every hidden word occurs **exactly once**, read in any of the 8
   directions (whatever the allowed ones); otherwise it is drawn again from step 1. So each
   word has exactly one answer.

Episode rules:

* The observation shows the grid (rows numbered from 1 at the top, columns from 1 at the
  left), the words to find, the directions words run in and the turn limit.
* Every `step()` is one turn. The claim is the **last** ``\boxed{...}`` of the action:
  ``\boxed{WORD ROW COL DIR}`` names a listed word, the row and column of its first letter
  and the compass direction it reads in: ``N`` (up), ``NE``, ``E`` (left to right), ``SE``,
  ``S`` (down), ``SW``, ``W`` (right to left) or ``NW``; e.g. ``\boxed{apple 2 5 SE}``. Case
  does not matter; spaces, commas or parentheses separate the parts
  (``\boxed{apple (2, 5) se}``). A claim in any of the 8 directions is checked, even one the
  puzzle does not use.
* A claim is a **hit** when the word reads from that cell in that direction; the word is
  then found. Otherwise it is a **miss** (also when the word would run off the grid).
* The episode terminates, solved, when every word is found. If the last allowed turn
  (``turn == max_turns``) does not solve it, it is truncated (``terminated=False,
  truncated=True``) and the observation gives the positions of the words not found.

Rewards, per turn:

==============================================================  =======  ======================
Action                                                          reward   ``info``
==============================================================  =======  ======================
hit that finds the last word                                    ``1.0``  ``correct=True``
hit (other words still hidden)                                  ``0.1``
miss                                                            ``0.0``
word not in the list, or already found                          ``-0.1`` ``invalid_action=True``
start cell outside the grid                                     ``-0.1`` ``invalid_action=True``
no ``\boxed{}``, or its content is not ``WORD ROW COL DIR``     ``-0.1`` ``invalid_action=True``
==============================================================  =======  ======================

Shaping: ``0.1`` per word found before the last, so a solved episode returns
``1.0 + 0.1 * (num_words - 1)`` minus ``0.1`` per invalid turn. Invalid turns change
nothing; reaching the turn limit costs nothing extra.

``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool), ``parsed_action``
(the stripped text inside the last ``\boxed{}``, or `None`), ``turn`` (turns taken), ``hit``
(bool) and ``found`` (how many words are found).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is a 6x6 grid with 3 words running ``E`` or
``S`` in 10 turns; ``"hard"`` a 10x10 grid with 7 words in all 8 directions in 20 turns;
``"random"`` draws easy or hard with equal probability at every reset. Without a difficulty:
8x8 with 5 words running ``E``, ``S``, ``SE`` or ``NE`` in 15 turns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from xpgym.envs.common.arguments import is_int
from xpgym.envs.common.presets import PresetEnv, resolve_presets
from xpgym.envs.games.letter_grid import render_letter_grid
from xpgym.envs.games.wordle import checked_words, parse_word

__all__ = [
    "DIFFICULTIES",
    "DIRECTIONS",
    "HIT_REWARD",
    "INVALID_REWARD",
    "MISS_REWARD",
    "WIN_REWARD",
    "Settings",
    "WordSearchEnv",
    "generate_puzzle",
    "occurrences",
    "parse_claim",
]

WIN_REWARD = 1.0
HIT_REWARD = 0.1
MISS_REWARD = 0.0
INVALID_REWARD = -0.1

DIRECTIONS: dict[str, tuple[int, int]] = {
    "N": (-1, 0),
    "NE": (-1, 1),
    "E": (0, 1),
    "SE": (1, 1),
    "S": (1, 0),
    "SW": (1, -1),
    "W": (0, -1),
    "NW": (-1, -1),
}
"""Compass direction -> ``(row step, column step)``; row 1 is the top row."""

_DIRECTION_NAMES = {
    "N": "N (up)",
    "NE": "NE (up-right)",
    "E": "E (left to right)",
    "SE": "SE (down-right)",
    "S": "S (down)",
    "SW": "SW (down-left)",
    "W": "W (right to left)",
    "NW": "NW (up-left)",
}
_CLAIM = re.compile(r"([a-z]+)[\s,(]+([0-9]{1,6})[\s,]+([0-9]{1,6})[\s,)]+([a-z]{1,2})")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz"
_MAX_ATTEMPTS = 200


class Settings(NamedTuple):
    """One game: a `size` x `size` grid hiding `num_words` words that run in `directions`."""

    size: int
    num_words: int
    directions: tuple[str, ...]
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(size=6, num_words=3, directions=("E", "S"), max_turns=10),
    "hard": Settings(size=10, num_words=7, directions=tuple(DIRECTIONS), max_turns=20),
}
"""Presets selected by `WordSearchEnv(difficulty=...)`."""

_DEFAULT = Settings(size=8, num_words=5, directions=("E", "S", "SE", "NE"), max_turns=15)

Placement = tuple[int, int, str]
"""``(row, col, direction)`` of a word's first letter, 0-based."""


def parse_claim(action: str) -> tuple[str | None, tuple[str, int, int, str] | None]:
    r"""Parse the claim in `action`.

    Returns:
        ``(boxed, claim)``: `boxed` is the stripped, lower-cased content of the last
        ``\boxed{...}`` (or `None`); `claim` is ``(word, row, col, direction)`` with 1-based
        `row`, `col` as written (not checked against the grid) and an upper-case direction
        from `DIRECTIONS`, or `None` if the content is not a claim. Never raises.
    """
    boxed = parse_word(action)
    if boxed is None:
        return None, None
    found = _CLAIM.fullmatch(boxed)
    if found is None or found[4].upper() not in DIRECTIONS:
        return boxed, None
    return boxed, (found[1], int(found[2]), int(found[3]), found[4].upper())


def _reads(grid: Sequence[str], word: str, row: int, col: int, direction: str) -> bool:
    """Whether `word` reads in `grid` from 0-based (`row`, `col`) in `direction`."""
    dr, dc = DIRECTIONS[direction]
    size = len(grid)
    for i, letter in enumerate(word):
        r, c = row + i * dr, col + i * dc
        if not (0 <= r < size and 0 <= c < size) or grid[r][c] != letter:
            return False
    return True


def occurrences(grid: Sequence[str], word: str) -> list[Placement]:
    """Every ``(row, col, direction)`` (0-based) from which `word` reads in the square `grid`,
    in all 8 directions."""
    size = len(grid)
    return [
        (r, c, d)
        for r in range(size)
        for c in range(size)
        if grid[r][c] == word[0]
        for d in DIRECTIONS
        if _reads(grid, word, r, c, d)
    ]


def _fits(cells: list[list[str]], word: str, row: int, col: int, direction: str) -> bool:
    dr, dc = DIRECTIONS[direction]
    size = len(cells)
    for i, letter in enumerate(word):
        r, c = row + i * dr, col + i * dc
        if not (0 <= r < size and 0 <= c < size) or cells[r][c] not in ("", letter):
            return False
    return True


def _try_place(
    rng: np.random.Generator, size: int, words: Sequence[str], directions: Sequence[str]
) -> tuple[list[str], dict[str, Placement]] | None:
    """Place `words` (longest first) and fill the rest; `None` if a word does not fit."""
    cells = [[""] * size for _ in range(size)]
    placements: dict[str, Placement] = {}
    for word in sorted(words, key=lambda w: (-len(w), w)):
        options = [
            (r, c, d)
            for r in range(size)
            for c in range(size)
            for d in directions
            if _fits(cells, word, r, c, d)
        ]
        if not options:
            return None
        row, col, direction = options[int(rng.integers(len(options)))]
        dr, dc = DIRECTIONS[direction]
        for i, letter in enumerate(word):
            cells[row + i * dr][col + i * dc] = letter
        placements[word] = (row, col, direction)
    for line in cells:
        for c, letter in enumerate(line):
            if not letter:
                line[c] = _ALPHABET[int(rng.integers(26))]
    return ["".join(line) for line in cells], placements


def generate_puzzle(
    rng: np.random.Generator,
    size: int,
    num_words: int,
    directions: Sequence[str],
    candidates: Sequence[str],
) -> tuple[list[str], dict[str, Placement]]:
    """A grid hiding `num_words` words of `candidates`, each occurring exactly once.

    Args:
        rng: The only source of randomness.
        size: Rows (= columns) of the grid.
        num_words: Words to hide (at most ``len(candidates)``).
        directions: Names from `DIRECTIONS` the words may run in.
        candidates: Lower-case words of at most `size` letters, no palindromes.

    Returns:
        ``(grid, placements)``: `size` strings of `size` lower-case letters, and each hidden
        word's 0-based ``(row, col, direction)``.

    Raises:
        RuntimeError: no valid grid after many attempts (too many or too long words for
            the grid).
    """
    for _ in range(_MAX_ATTEMPTS):
        picks = rng.choice(len(candidates), size=num_words, replace=False)
        placed = _try_place(rng, size, [candidates[int(k)] for k in picks], directions)
        if placed is None:
            continue
        grid, placements = placed
        if all(len(occurrences(grid, word)) == 1 for word in placements):
            return grid, placements
    raise RuntimeError(
        f"WordSearch: could not hide {num_words} words in a {size}x{size} grid after "
        f"{_MAX_ATTEMPTS} attempts; use a bigger grid or fewer words"
    )


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


def _where(placement: Placement) -> str:
    row, col, direction = placement
    return f"row {row + 1}, column {col + 1}, going {direction}"


class WordSearchEnv(PresetEnv[tuple[Settings, tuple[str, ...]]]):
    r"""Find hidden words in a letter grid; claims ``\boxed{WORD ROW COL DIR}``.

    Args:
        size: Rows and columns of the grid (at least 4).
        num_words: Words to hide (at least 1).
        directions: Compass names from `DIRECTIONS` the words may run in (e.g. ``("E",
            "S")``); claims are checked in all 8 whatever this is.
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``; a preset from
            `DIFFICULTIES` gives the defaults, and values passed explicitly replace the
            preset's (for ``"random"``, in both presets).
        words: Candidate words (lower-case ASCII letters); default: `load_words()`.

    Attributes:
        size, num_words, directions, max_turns: This episode's settings.
        episode_difficulty: This episode's preset name (`None` without a difficulty).
        grid: The rows of the grid (lower-case strings). words: The hidden words, sorted.
        placements: Each word's 0-based ``(row, col, direction)``. found: Words found, in
        order. turn: Turns taken.

    Raises:
        ValueError: unknown difficulty, a number or direction out of range, a bad word, or
            fewer candidate words than `num_words`.
        TypeError: a number is not an int.
        RuntimeError: (at reset) the words cannot be hidden in the grid.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        size: int | None = None,
        num_words: int | None = None,
        directions: Iterable[str] | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
        words: Iterable[str] | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        vocabulary = checked_words(words, "WordSearchEnv")
        choices: dict[str | None, tuple[Settings, tuple[str, ...]]] = {}
        for name, preset in presets.items():
            s = _validated(preset, size, num_words, directions, max_turns)
            candidates = tuple(sorted({w for w in vocabulary if len(w) <= s.size and w != w[::-1]}))
            if len(candidates) < s.num_words:
                raise ValueError(
                    f"WordSearchEnv: {len(candidates)} usable words (at most {s.size} letters, "
                    f"not palindromes) for num_words={s.num_words}"
                )
            choices[name] = (s, candidates)
        super().__init__(difficulty, choices)
        self.grid: list[str] = []
        self.placements: dict[str, Placement] = {}
        self.words: list[str] = []
        self.found: list[str] = []
        self.turn = 0

    def _apply_preset(self, preset: tuple[Settings, tuple[str, ...]]) -> None:
        settings, self._candidates = preset
        self.size, self.num_words, self.directions, self.max_turns = settings

    def _remaining(self) -> list[str]:
        return [w for w in self.words if w not in self.found]

    def _status(self) -> str:
        left = self._remaining()
        found = ", ".join(w.upper() for w in self.found) or "none"
        return (
            f"Found: {found}. Still to find ({len(left)}): "
            f"{', '.join(w.upper() for w in left)}. {_turns(self.max_turns - self.turn)} left."
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Generate a new puzzle (for ``difficulty="random"``, first draw the preset).

        Returns:
            The instructions, grid and word list, and info ``{"difficulty", "size",
            "num_words", "directions", "max_turns"}``.
        """
        super().reset(seed=seed)
        self.grid, self.placements = generate_puzzle(
            self.np_random, self.size, self.num_words, self.directions, self._candidates
        )
        self.words = sorted(self.placements)
        self.found = []
        self.turn = 0
        runs = ", ".join(_DIRECTION_NAMES[d] for d in self.directions)
        obs = (
            f"Word search: {self.num_words} words are hidden in the {self.size}x{self.size} "
            f"grid below, each in a straight line running {runs}. Rows are numbered from 1 at "
            "the top, columns from 1 at the left. Claim one word per turn as "
            "\\boxed{WORD ROW COL DIR}: the word, the row and column of its first letter and "
            "the direction it reads in (N, NE, E, SE, S, SW, W or NW), e.g. "
            "\\boxed{apple 2 5 SE}; only the last \\boxed{} in your reply counts. You have "
            f"{_turns(self.max_turns)}.\n"
            f"{render_letter_grid([row.upper() for row in self.grid])}\n"
            f"Words to find ({self.num_words}): {', '.join(w.upper() for w in self.words)}."
        )
        info = {
            "difficulty": self.episode_difficulty,
            "size": self.size,
            "num_words": self.num_words,
            "directions": list(self.directions),
            "max_turns": self.max_turns,
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        boxed, claim = parse_claim(action)
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        hit = correct = False
        problem = None
        reward = MISS_REWARD
        if claim is None:
            problem = (
                "no \\boxed{} found"
                if boxed is None
                else f"{boxed!r:.40} is not a claim like \\boxed{{apple 2 5 SE}}"
            )
        else:
            word, row, col, direction = claim
            if word not in self.words:
                problem = f"{word.upper():.20} is not one of the words to find"
            elif word in self.found:
                problem = f"{word.upper()} is already found"
            elif not (1 <= row <= self.size and 1 <= col <= self.size):
                problem = f"cell ({row}, {col}) is outside the {self.size}x{self.size} grid"
            else:
                where = _where((row - 1, col - 1, direction))
                hit = _reads(self.grid, word, row - 1, col - 1, direction)
                if hit:
                    self.found.append(word)
                    correct = not self._remaining()
                    reward = WIN_REWARD if correct else HIT_REWARD
                    text = f"{prefix} yes, {word.upper()} is at {where}."
                else:
                    text = f"{prefix} no, {word.upper()} does not read from {where}."
        invalid = problem is not None
        if invalid:
            reward = INVALID_REWARD
            text = f"{prefix} invalid claim: {problem}; nothing changed."
        truncated = not correct and self.turn >= self.max_turns
        if correct:
            text += " You found every word!"
        elif truncated:
            missed = "; ".join(
                f"{w.upper()} at {_where(self.placements[w])}" for w in self._remaining()
            )
            text += f" No turns left. Not found: {missed}."
        else:
            text += " " + self._status()
        info = {
            "correct": correct,
            "invalid_action": invalid,
            "parsed_action": boxed,
            "turn": self.turn,
            "hit": hit,
            "found": len(self.found),
        }
        return text, reward, correct, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{WORD ROW COL DIR}``: a hidden word, a cell of the grid and one of the 8
        directions, each uniform (from `np_random`); usually a miss."""
        rng = self.np_random
        pool = self.words or self._candidates  # before the first reset: any candidate
        word = pool[int(rng.integers(len(pool)))]
        row, col = (int(v) for v in rng.integers(1, self.size + 1, size=2))
        direction = tuple(DIRECTIONS)[int(rng.integers(len(DIRECTIONS)))]
        return f"\\boxed{{{word} {row} {col} {direction}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: grid, placements, found words and turn (fresh copies)."""
        return {
            "grid": list(self.grid),
            "placements": dict(self.placements),
            "found": list(self.found),
            "turn": self.turn,
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.grid = list(state["grid"])
        self.placements = {w: tuple(p) for w, p in state["placements"].items()}
        self.words = sorted(self.placements)
        self.found = list(state["found"])
        self.turn = state["turn"]


def _validated(
    preset: Settings,
    size: int | None,
    num_words: int | None,
    directions: Iterable[str] | None,
    max_turns: int | None,
) -> Settings:
    if isinstance(directions, str):
        raise TypeError(f"WordSearchEnv: directions must be a list of names, got {directions!r}")
    settings = Settings(
        preset.size if size is None else size,
        preset.num_words if num_words is None else num_words,
        preset.directions if directions is None else tuple(directions),
        preset.max_turns if max_turns is None else max_turns,
    )
    for name in ("size", "num_words", "max_turns"):
        value = getattr(settings, name)
        if not is_int(value):
            raise TypeError(f"WordSearchEnv: {name} must be an int, got {value!r}")
    size_, words_, dirs, turns = settings
    if int(size_) < 4:
        raise ValueError(f"WordSearchEnv: size must be >= 4, got {size_}")
    if int(words_) < 1:
        raise ValueError(f"WordSearchEnv: num_words must be >= 1, got {words_}")
    if int(turns) < 1:
        raise ValueError(f"WordSearchEnv: max_turns must be >= 1, got {turns}")
    unknown = [d for d in dirs if d not in DIRECTIONS]
    if not dirs or unknown or len(set(dirs)) != len(dirs):
        raise ValueError(
            f"WordSearchEnv: directions must be distinct names from {list(DIRECTIONS)}, "
            f"got {list(dirs)!r}"
        )
    return Settings(int(size_), int(words_), tuple(dirs), int(turns))
