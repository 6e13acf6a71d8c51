r"""Crosswords: solve a small generated crossword whose clues are anagrams.

What a clue is: the answer's letters in a scrambled order (never the answer itself), e.g.
``anagram of TSEAM``, with the answer's length and start cell, plus, in the easy and default
presets, the answer's first letter. Every answer is a word of the word list (by default the
shipped ``xpgym/data/words_en.jsonl``) that is the **only** word of that list with its
letters, so each clue determines its answer within the list, and crossing letters from
solved entries help further. (An English word outside the list may share the letters; such
an answer is counted wrong.)

Puzzle generation (all randomness from `np_random`):

1. The first word is laid across or down through the middle of a ``size`` x ``size``
   canvas.
2. Each next word is a word of ``min_length..max_length`` letters, not used yet, that
   crosses at least one placed word on an equal letter, and is laid so that every maximal
   run of two or more letters in the grid is exactly one placed word: the cells just
   before and after the word are empty, its new cells have no letter beside them across
   the word, and it never runs along (overlaps) a word of its own direction. Candidate
   words are tried in a random order and the placement is drawn uniformly among the valid
   ones.
3. When ``num_words`` words are placed, the grid is cropped to their bounding box and the
   entries are numbered like a printed crossword: start cells in reading order (row by row,
   left to right) get 1, 2, ...; a cell that starts an across and a down word has one number.

Episode rules:

* The observation shows the rules, the grid (``#`` no letter, ``.`` an unknown letter, a
  capital letter where known; rows and columns numbered from 1) and the clues.
* Every `step()` is one turn. The answer is the **last** ``\boxed{...}`` of the action:
  ``\boxed{NUMBER DIRECTION: WORD}``, e.g. ``\boxed{3 across: steam}``; the direction may be
  written ``a``/``d`` (``\boxed{3a: steam}``), case does not matter, and ``:``, ``=``, ``-`` or
  spaces separate the word.
* A right answer fills the entry's cells; its letters then show in the grid and in the
  patterns of the entries crossing it. A wrong answer (of the right length) fills nothing.
* The episode terminates, solved, when every entry is filled. If the last allowed turn
  (``turn == max_turns``) does not solve it, it is truncated (``terminated=False,
  truncated=True``) and the observation gives the missing answers.

Rewards, per turn:

==============================================================  =======  ======================
Action                                                          reward   ``info``
==============================================================  =======  ======================
right answer that completes the crossword                       ``1.0``  ``correct=True``
right answer (other entries unsolved)                           ``0.1``
wrong answer of the right length                                ``0.0``
no such entry, entry already solved, or wrong length            ``-0.1`` ``invalid_action=True``
no ``\boxed{}``, or not ``NUMBER DIRECTION: WORD`` inside       ``-0.1`` ``invalid_action=True``
==============================================================  =======  ======================

Shaping: ``0.1`` per entry solved before the last, so a solved episode returns
``1.0 + 0.1 * (num_words - 1)`` minus ``0.1`` per invalid turn. Invalid turns change
nothing; reaching the turn limit costs nothing extra.

``info`` after every step: ``correct`` (bool), ``invalid_action`` (bool), ``parsed_action``
(the stripped, lower-cased text inside the last ``\boxed{}``, or `None`), ``turn`` (turns
taken), ``hit`` (bool: a right answer) and ``solved`` (entries solved).

Difficulty presets (`DIFFICULTIES`): ``"easy"`` is 3 words of 4-5 letters on a canvas of
7x7 with first letters shown, 9 turns; ``"hard"`` 7 words of 6-8 letters on 11x11 without
first letters, 21 turns; ``"random"`` draws easy or hard with equal probability at every
reset. Without a difficulty: 5 words of 5-7 letters on 9x9 with first letters, 15 turns.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from xpgym.envs.common.arguments import is_int
from xpgym.envs.common.presets import PresetEnv, resolve_presets
from xpgym.envs.games.letter_grid import render_letter_grid
from xpgym.envs.games.wordle import checked_words, parse_word

__all__ = [
    "DIFFICULTIES",
    "HIT_REWARD",
    "INVALID_REWARD",
    "MISS_REWARD",
    "WIN_REWARD",
    "CrosswordsEnv",
    "Entry",
    "Settings",
    "generate_crossword",
    "parse_answer",
    "solution_grid",
]

WIN_REWARD = 1.0
HIT_REWARD = 0.1
MISS_REWARD = 0.0
INVALID_REWARD = -0.1

BLOCK = "#"
UNKNOWN = "."

_STEPS = {"across": (0, 1), "down": (1, 0)}
_ANSWER = re.compile(r"([0-9]{1,3})\s*-?\s*(across|down|a|d)[\s:=.\-]+([a-z]+)")
_MAX_ATTEMPTS = 200


class Settings(NamedTuple):
    """One game: `num_words` words of ``min_length..max_length`` letters on a canvas of at
    most `size` x `size`; `reveal_first` shows each answer's first letter."""

    size: int
    num_words: int
    min_length: int
    max_length: int
    reveal_first: bool
    max_turns: int


DIFFICULTIES: dict[str, Settings] = {
    "easy": Settings(
        size=7, num_words=3, min_length=4, max_length=5, reveal_first=True, max_turns=9
    ),
    "hard": Settings(
        size=11, num_words=7, min_length=6, max_length=8, reveal_first=False, max_turns=21
    ),
}
"""Presets selected by `CrosswordsEnv(difficulty=...)`."""

_DEFAULT = Settings(
    size=9, num_words=5, min_length=5, max_length=7, reveal_first=True, max_turns=15
)


class Entry(NamedTuple):
    """One crossword entry; `row`, `col` (0-based) are its first cell in the cropped grid."""

    number: int
    direction: str
    answer: str
    row: int
    col: int
    anagram: str

    @property
    def key(self) -> str:
        """``"3 across"``: how the entry is named in clues and answers."""
        return f"{self.number} {self.direction}"

    def cells(self) -> list[tuple[int, int]]:
        """The entry's cells, first letter first, 0-based ``(row, col)``."""
        dr, dc = _STEPS[self.direction]
        return [(self.row + i * dr, self.col + i * dc) for i in range(len(self.answer))]


def parse_answer(action: str) -> tuple[str | None, tuple[int, str, str] | None]:
    r"""Parse the answer in `action`.

    Returns:
        ``(boxed, answer)``: `boxed` is the stripped, lower-cased content of the last
        ``\boxed{...}`` (or `None`); `answer` is ``(number, direction, word)`` with direction
        ``"across"`` or ``"down"``, or `None` if the content is not an answer. Never raises.
    """
    boxed = parse_word(action)
    if boxed is None:
        return None, None
    found = _ANSWER.fullmatch(boxed)
    if found is None:
        return boxed, None
    direction = "across" if found[2][0] == "a" else "down"
    return boxed, (int(found[1]), direction, found[3])


class _Canvas:
    """Letters placed so far, and the directions of the words through each cell."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.letters: dict[tuple[int, int], str] = {}
        self.cells_of: dict[str, list[tuple[int, int]]] = {}  # letter -> cells holding it
        self.runs: dict[tuple[int, int], set[str]] = {}
        self.words: list[tuple[str, int, int, str]] = []

    def empty(self, r: int, c: int) -> bool:
        return (r, c) not in self.letters

    def fits(self, word: str, row: int, col: int, direction: str) -> bool:
        """Whether `word` may go at (`row`, `col`) in `direction` (see the module docstring)."""
        dr, dc = _STEPS[direction]
        end_r, end_c = row + (len(word) - 1) * dr, col + (len(word) - 1) * dc
        if min(row, col) < 0 or max(end_r, end_c) >= self.size:
            return False
        if not (self.empty(row - dr, col - dc) and self.empty(end_r + dr, end_c + dc)):
            return False
        crossings = 0
        for i, letter in enumerate(word):
            r, c = row + i * dr, col + i * dc
            if not self.empty(r, c):
                if self.letters[r, c] != letter or direction in self.runs[r, c]:
                    return False
                crossings += 1
            elif not (self.empty(r + dc, c + dr) and self.empty(r - dc, c - dr)):
                return False
        return 0 < crossings < len(word)

    def place(self, word: str, row: int, col: int, direction: str) -> None:
        dr, dc = _STEPS[direction]
        for i, letter in enumerate(word):
            cell = (row + i * dr, col + i * dc)
            if cell not in self.letters:
                self.letters[cell] = letter
                self.cells_of.setdefault(letter, []).append(cell)
            self.runs.setdefault(cell, set()).add(direction)
        self.words.append((word, row, col, direction))

    def placements(self, word: str) -> list[tuple[int, int, str]]:
        """Every valid ``(row, col, direction)`` for `word`, in a fixed order."""
        found = set()
        for i, letter in enumerate(word):
            for r, c in self.cells_of.get(letter, ()):
                for direction, (dr, dc) in _STEPS.items():
                    start = (r - i * dr, c - i * dc, direction)
                    if start not in found and self.fits(word, *start):
                        found.add(start)
        return sorted(found)


def _try_build(
    rng: np.random.Generator, size: int, num_words: int, candidates: Sequence[str]
) -> _Canvas | None:
    order = [candidates[int(k)] for k in rng.permutation(len(candidates))]
    canvas = _Canvas(size)
    first = order[0]
    if rng.integers(2):
        canvas.place(first, (size - len(first)) // 2, size // 2, "down")
    else:
        canvas.place(first, size // 2, (size - len(first)) // 2, "across")
    for word in order[1:]:
        if len(canvas.words) == num_words:
            break
        options = canvas.placements(word)
        if options:
            canvas.place(word, *options[int(rng.integers(len(options)))])
    return canvas if len(canvas.words) == num_words else None


def _scramble(rng: np.random.Generator, word: str) -> str:
    while True:
        letters = "".join(word[int(k)] for k in rng.permutation(len(word)))
        if letters != word:
            return letters


def generate_crossword(
    rng: np.random.Generator, size: int, num_words: int, candidates: Sequence[str]
) -> tuple[int, int, list[Entry]]:
    """A crossword of `num_words` words from `candidates` (see the module docstring).

    Args:
        rng: The only source of randomness.
        size: Side of the canvas; the cropped grid is at most `size` x `size`.
        num_words: Entries to place (at least 1).
        candidates: Distinct lower-case words of at most `size` letters; each must contain at
            least two different letters (anagram clues differ from the answer).

    Returns:
        ``(rows, cols, entries)``: the cropped grid's size and the entries, sorted by number
        then direction (across first).

    Raises:
        RuntimeError: no crossword after many attempts (the canvas is too small or the
            words share too few letters).
    """
    for _ in range(_MAX_ATTEMPTS):
        canvas = _try_build(rng, size, num_words, candidates)
        if canvas is not None:
            break
    else:
        raise RuntimeError(
            f"Crosswords: could not build a crossword of {num_words} words on a {size}x{size} "
            f"canvas after {_MAX_ATTEMPTS} attempts; use a bigger canvas or fewer words"
        )
    top = min(r for r, _ in canvas.letters)
    left = min(c for _, c in canvas.letters)
    rows = max(r for r, _ in canvas.letters) - top + 1
    cols = max(c for _, c in canvas.letters) - left + 1
    starts = sorted({(row - top, col - left) for _, row, col, _ in canvas.words})
    number = {cell: i for i, cell in enumerate(starts, start=1)}
    entries = [
        Entry(number[row - top, col - left], d, word, row - top, col - left, _scramble(rng, word))
        for word, row, col, d in canvas.words
    ]
    return rows, cols, sorted(entries, key=lambda e: (e.number, e.direction))


def solution_grid(rows: int, cols: int, entries: Iterable[Entry]) -> list[str]:
    """The solved grid: one string per row, `BLOCK` (``#``) where no entry passes."""
    cells = [[BLOCK] * cols for _ in range(rows)]
    for entry in entries:
        for (r, c), letter in zip(entry.cells(), entry.answer, strict=True):
            cells[r][c] = letter
    return ["".join(row) for row in cells]


def _turns(n: int) -> str:
    return "1 turn" if n == 1 else f"{n} turns"


class CrosswordsEnv(PresetEnv[tuple[Settings, tuple[str, ...]]]):
    r"""Solve a generated crossword with anagram clues; answers ``\boxed{3 across: WORD}``.

    Args:
        size: Side of the canvas the crossword is built on (the grid is at most this big).
        num_words: Entries in the crossword (at least 1).
        min_length, max_length: Answer lengths (``3 <= min_length <= max_length <= size``).
        reveal_first: Show each answer's first letter in its clue and in the grid.
        max_turns: Turns before the episode is truncated (at least 1).
        difficulty: `None`, ``"easy"``, ``"hard"`` or ``"random"``; a preset from
            `DIFFICULTIES` gives the defaults, and values passed explicitly replace the
            preset's (for ``"random"``, in both presets).
        words: The word list (lower-case ASCII letters); default: `load_words()`. Answers
            are the words of the length range whose letters no other word of the list has.

    Attributes:
        size, num_words, min_length, max_length, reveal_first, max_turns: This episode's
            settings. episode_difficulty: This episode's preset name (`None` without one).
        rows, cols: The grid's size. entries: The `Entry` list, by number.
        solved: Keys (``"3 across"``) of solved entries, in order. turn: Turns taken.

    Raises:
        ValueError: unknown difficulty, a number out of range, a bad word, or fewer
            candidate answers than `num_words`.
        TypeError: a number is not an int, or `reveal_first` not a bool.
        RuntimeError: (at reset) no crossword could be built.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": True}

    def __init__(
        self,
        size: int | None = None,
        num_words: int | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        reveal_first: bool | None = None,
        max_turns: int | None = None,
        difficulty: str | None = None,
        words: Iterable[str] | None = None,
    ) -> None:
        presets = resolve_presets(difficulty, DIFFICULTIES, _DEFAULT)
        vocabulary = sorted(set(checked_words(words, "CrosswordsEnv")))
        letter_sets = Counter("".join(sorted(w)) for w in vocabulary)
        choices: dict[str | None, tuple[Settings, tuple[str, ...]]] = {}
        for name, preset in presets.items():
            given = (size, num_words, min_length, max_length, reveal_first, max_turns)
            s = _validated(preset, given)
            candidates = tuple(
                w
                for w in vocabulary
                if s.min_length <= len(w) <= s.max_length
                and letter_sets["".join(sorted(w))] == 1
                and len(set(w)) > 1
            )
            if len(candidates) < s.num_words:
                raise ValueError(
                    f"CrosswordsEnv: {len(candidates)} candidate answers of {s.min_length}.."
                    f"{s.max_length} letters for num_words={s.num_words}"
                )
            choices[name] = (s, candidates)
        super().__init__(difficulty, choices)
        self.rows = self.cols = 0
        self.entries: list[Entry] = []
        self.solved: list[str] = []
        self.turn = 0

    def _apply_preset(self, preset: tuple[Settings, tuple[str, ...]]) -> None:
        settings, self._candidates = preset
        (
            self.size,
            self.num_words,
            self.min_length,
            self.max_length,
            self.reveal_first,
            self.max_turns,
        ) = settings

    def _known(self) -> dict[tuple[int, int], str]:
        """Cells whose letter the player knows: solved entries (and first letters)."""
        known: dict[tuple[int, int], str] = {}
        for entry in self.entries:
            cells = entry.cells()
            if entry.key in self.solved:
                known.update(zip(cells, entry.answer, strict=True))
            elif self.reveal_first:
                known[cells[0]] = entry.answer[0]
        return known

    def _grid(self) -> str:
        cells = [
            [BLOCK if ch == BLOCK else UNKNOWN for ch in row]
            for row in solution_grid(self.rows, self.cols, self.entries)
        ]
        for (r, c), letter in self._known().items():
            cells[r][c] = letter.upper()
        return render_letter_grid(["".join(row) for row in cells])

    def _clues(self) -> str:
        known = self._known()
        lines = []
        for entry in self.entries:
            if entry.key in self.solved:
                continue
            n = len(entry.answer)
            first = f", starts with {entry.answer[0].upper()}" if self.reveal_first else ""
            pattern = " ".join(known.get(cell, "_").upper() for cell in entry.cells())
            lines.append(
                f"{entry.key} ({n} letters, from row {entry.row + 1}, column {entry.col + 1}): "
                f"anagram of {entry.anagram.upper()}{first}; so far: {pattern}"
            )
        return "\n".join(lines)

    def _board(self) -> str:
        return f"{self._grid()}\nClues:\n{self._clues()}"

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Generate a new crossword (for ``difficulty="random"``, first draw the preset).

        Returns:
            The instructions, grid and clues, and info ``{"difficulty", "rows", "cols",
            "num_words", "max_turns"}``.
        """
        super().reset(seed=seed)
        self.rows, self.cols, self.entries = generate_crossword(
            self.np_random, self.size, self.num_words, self._candidates
        )
        self.solved = []
        self.turn = 0
        obs = (
            "Crossword: fill the grid with English words. Each clue gives the answer's letters "
            "in a scrambled order (an anagram), its length and its first cell; answers cross "
            "where they share a cell. In the grid, # has no letter and . is a letter to find; "
            "rows are numbered from 1 at the top, columns from 1 at the left. Give one answer "
            "per turn as \\boxed{NUMBER DIRECTION: WORD}, e.g. \\boxed{1 across: steam}; only "
            f"the last \\boxed{{}} in your reply counts. You have {_turns(self.max_turns)}.\n"
            f"{self._board()}"
        )
        info = {
            "difficulty": self.episode_difficulty,
            "rows": self.rows,
            "cols": self.cols,
            "num_words": self.num_words,
            "max_turns": self.max_turns,
        }
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Take one turn; see the module docstring for the rules and rewards."""
        self.turn += 1
        boxed, answer = parse_answer(action)
        prefix = f"Turn {self.turn}/{self.max_turns}:"
        hit = correct = False
        problem = None
        reward = MISS_REWARD
        if answer is None:
            problem = (
                "no \\boxed{} found"
                if boxed is None
                else f"{boxed!r:.40} is not an answer like \\boxed{{1 across: steam}}"
            )
        else:
            number, direction, word = answer
            key = f"{number} {direction}"
            entry = next((e for e in self.entries if e.key == key), None)
            if entry is None:
                problem = f"there is no entry {key}"
            elif key in self.solved:
                problem = f"{key} is already solved"
            elif len(word) != len(entry.answer):
                problem = (
                    f"{key} has {len(entry.answer)} letters, {word.upper():.20} has {len(word)}"
                )
            elif word == entry.answer:
                hit = True
                self.solved.append(key)
                correct = len(self.solved) == len(self.entries)
                reward = WIN_REWARD if correct else HIT_REWARD
                text = f"{prefix} {key}: {word.upper()} is right!"
            else:
                text = f"{prefix} {key}: {word.upper()} is wrong."
        invalid = problem is not None
        if invalid:
            reward = INVALID_REWARD
            text = f"{prefix} invalid answer: {problem}; nothing changed."
        left = len(self.entries) - len(self.solved)
        truncated = not correct and self.turn >= self.max_turns
        if correct:
            text += " The crossword is complete!"
        elif truncated:
            missing = ", ".join(
                f"{e.key} {e.answer.upper()}" for e in self.entries if e.key not in self.solved
            )
            text += f" No turns left. The missing answers were: {missing}."
        else:
            text += f" {left} to solve, {_turns(self.max_turns - self.turn)} left."
            if hit:
                text += f"\n{self._board()}"
        info = {
            "correct": correct,
            "invalid_action": invalid,
            "parsed_action": boxed,
            "turn": self.turn,
            "hit": hit,
            "solved": len(self.solved),
        }
        return text, reward, correct, truncated, info

    def sample_random_action(self) -> str:
        r"""``\boxed{N DIR: WORD}`` for a uniformly drawn entry (solved or not) and a uniformly
        drawn candidate answer of its length (from `np_random`); usually wrong."""
        rng = self.np_random
        if not self.entries:  # before the first reset
            return "\\boxed{1 across: word}"
        entry = self.entries[int(rng.integers(len(self.entries)))]
        pool = [w for w in self._candidates if len(w) == len(entry.answer)]
        return f"\\boxed{{{entry.key}: {pool[int(rng.integers(len(pool)))]}}}"

    def _episode_state(self) -> dict[str, Any]:
        """For `get_state()`: grid size, entries, solved keys and turn (fresh lists)."""
        return {
            "rows": self.rows,
            "cols": self.cols,
            "entries": [tuple(e) for e in self.entries],
            "solved": list(self.solved),
            "turn": self.turn,
        }

    def _restore_episode_state(self, state: dict[str, Any]) -> None:
        """Restore what `_episode_state` took."""
        self.rows, self.cols = state["rows"], state["cols"]
        self.entries = [Entry(*e) for e in state["entries"]]
        self.solved = list(state["solved"])
        self.turn = state["turn"]


def _validated(preset: Settings, given: tuple[Any, ...]) -> Settings:
    settings = Settings._make(p if v is None else v for p, v in zip(preset, given, strict=True))
    for name, value in settings._asdict().items():
        if name == "reveal_first":
            if not isinstance(value, bool):
                raise TypeError(f"CrosswordsEnv: reveal_first must be a bool, got {value!r}")
        elif not is_int(value):
            raise TypeError(f"CrosswordsEnv: {name} must be an int, got {value!r}")
    s = Settings._make(v if isinstance(v, bool) else int(v) for v in settings)
    if not 3 <= s.min_length <= s.max_length <= s.size:
        raise ValueError(
            "CrosswordsEnv: need 3 <= min_length <= max_length <= size, got "
            f"{s.min_length}, {s.max_length}, {s.size}"
        )
    if s.num_words < 1:
        raise ValueError(f"CrosswordsEnv: num_words must be >= 1, got {s.num_words}")
    if s.max_turns < 1:
        raise ValueError(f"CrosswordsEnv: max_turns must be >= 1, got {s.max_turns}")
    return s
