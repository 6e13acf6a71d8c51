"""Language games. Ids: ``game:<Name>-v0[-easy|-hard|-random]``; tool variants ``...-python``.

Each game is one module whose docstring gives its rules, rewards and action format; its
difficulty presets are that module's `DIFFICULTIES` (and its default settings). The
one-line descriptions registered here state the presets' numbers, and
``tests/envs/test_preset_descriptions.py`` checks each one against its preset. Every
registered id has a golden transcript in ``tests/envs/golden`` (``scripts/record_golden.py``).
"""

from __future__ import annotations

from typing import NamedTuple

from xpgym.core.wrappers.tool_variants import register_tool_variant
from xpgym.envs.common.presets import register_presets

__all__ = ["GAMES", "Game", "register_envs"]


class Game(NamedTuple):
    """One game with difficulty presets: its name, ``module:Class`` entry point and the
    descriptions of its default, ``-easy`` and ``-hard`` ids (`register_presets` writes the
    ``-random`` one)."""

    name: str
    entry_point: str
    default: str
    easy: str
    hard: str


_PACKAGE = "xpgym.envs.games"

GAMES: tuple[Game, ...] = (
    Game(
        "GuessTheNumber",
        f"{_PACKAGE}.guess_the_number:GuessTheNumberEnv",
        "Guess a hidden integer in 1..20 from higher/lower hints; 7 turns.",
        "Guess a hidden integer in 1..10 from higher/lower hints; 4 turns.",
        "Guess a hidden integer in 1..50 from higher/lower hints; 7 turns.",
    ),
    Game(
        "Mastermind",
        f"{_PACKAGE}.mastermind:MastermindEnv",
        "Crack a 4-peg code of colours 1..6 from black/white pegs; 10 turns.",
        "Crack a 3-peg code of colours 1..6 from black/white pegs; 8 turns.",
        "Crack a 5-peg code of colours 1..8 from black/white pegs; 12 turns.",
    ),
    Game(
        "Minesweeper",
        f"{_PACKAGE}.minesweeper:MinesweeperEnv",
        "Reveal every safe cell of a 6x6 grid with 5 mines; 36 turns.",
        "Reveal every safe cell of a 5x5 grid with 3 mines; 25 turns.",
        "Reveal every safe cell of an 8x8 grid with 10 mines; 64 turns.",
    ),
    Game(
        "TowerOfHanoi",
        f"{_PACKAGE}.tower_of_hanoi:TowerOfHanoiEnv",
        "Move a 4-disk tower from peg A to peg C; 30 turns (optimum 15).",
        "Move a 3-disk tower from peg A to peg C; 14 turns (optimum 7).",
        "Move a 5-disk tower from peg A to peg C; 62 turns (optimum 31).",
    ),
    Game(
        "Sudoku",
        f"{_PACKAGE}.sudoku:SudokuEnv",
        "Sudoku 9x9 with 36 givens and a unique solution; 100 turns.",
        "Sudoku 4x4 with 8 givens and a unique solution; 20 turns.",
        "Sudoku 9x9 with 30 givens and a unique solution; 100 turns.",
    ),
    Game(
        "Game2048",
        f"{_PACKAGE}.game_2048:Game2048Env",
        "2048 on a 4x4 board: reach the 2048 tile; 3000 turns.",
        "2048 on a 4x4 board: reach the 256 tile; 500 turns.",
        "2048 on a 4x4 board: reach the 2048 tile; 3000 turns.",
    ),
    Game(
        "Wordle",
        f"{_PACKAGE}.wordle:WordleEnv",
        "Find a hidden 5-letter word from G/Y/_ letter feedback; 6 turns.",
        "Find a hidden 4-letter word from G/Y/_ letter feedback; 8 turns.",
        "Find a hidden 6-letter word from G/Y/_ letter feedback; 6 turns.",
    ),
    Game(
        "Hangman",
        f"{_PACKAGE}.hangman:HangmanEnv",
        "Guess a hidden 4-8 letter word letter by letter; 6 lives, 30 turns.",
        "Guess a hidden 6-8 letter word letter by letter; 8 lives, 30 turns.",
        "Guess a hidden 4-5 letter word letter by letter; 5 lives, 30 turns.",
    ),
    Game(
        "FifteenPuzzle",
        f"{_PACKAGE}.fifteen_puzzle:FifteenPuzzleEnv",
        "Solve a 4x4 sliding puzzle scrambled by 20 moves; 60 turns.",
        "Solve a 3x3 sliding puzzle scrambled by 8 moves; 30 turns.",
        "Solve a 4x4 sliding puzzle scrambled by 40 moves; 100 turns.",
    ),
    Game(
        "Sokoban",
        f"{_PACKAGE}.sokoban:SokobanEnv",
        "Sokoban: push 1 box onto its goal in a 7x7 room; 40 turns.",
        "Sokoban: push 1 box onto its goal in a 6x6 room; 30 turns.",
        "Sokoban: push 2 boxes onto their goals in a 7x7 room; 60 turns.",
    ),
    Game(
        "WordSearch",
        f"{_PACKAGE}.word_search:WordSearchEnv",
        "Find 5 hidden words (E, S, SE, NE) in an 8x8 letter grid; 15 turns.",
        "Find 3 hidden words (E, S) in a 6x6 letter grid; 10 turns.",
        "Find 7 hidden words (all 8 directions) in a 10x10 letter grid; 20 turns.",
    ),
    Game(
        "Crosswords",
        f"{_PACKAGE}.crosswords:CrosswordsEnv",
        "Crossword of 5 words (5-7 letters) with anagram clues and first letters; 15 turns.",
        "Crossword of 3 words (4-5 letters) with anagram clues and first letters; 9 turns.",
        "Crossword of 7 words (6-8 letters) with anagram clues only; 21 turns.",
    ),
)
"""The games: ``game:<name>-v0`` and its ``-easy``, ``-hard`` and ``-random`` ids each."""


def register_envs() -> None:
    """Register the game ids; entry points are imported only by `xpgym.make`."""
    for game in GAMES:
        register_presets("game", *game)
    register_tool_variant(
        "game:GuessTheNumber-v0",
        "xpgym.core.tools.python:PythonTool",
        "python",
        max_tool_calls=3,
        description="GuessTheNumber with a sandboxed Python tool (at most 3 calls).",
    )
