"""Language games. Ids: ``game:<Name>-v0[-easy|-hard|-random]``; tool variants ``...-python``.

Each game is one module whose docstring gives its rules, rewards and action format; every
registered id has a golden transcript in ``tests/envs/golden`` (``scripts/record_golden.py``).
"""

from __future__ import annotations

from xpgym.core.registry import register
from xpgym.core.wrappers.tool_variants import register_tool_variant
from xpgym.envs.common.presets import register_presets


def register_envs() -> None:
    """Register the game ids; entry points are imported only by `xpgym.make`."""
    guess = "xpgym.envs.games.guess_the_number:GuessTheNumberEnv"
    register(
        "game:GuessTheNumber-v0",
        guess,
        description="Guess a hidden integer in 1..20 from higher/lower hints; 7 turns.",
    )
    register(
        "game:GuessTheNumber-v0-easy",
        guess,
        difficulty="easy",
        description="Guess a hidden integer in 1..10 from higher/lower hints; 4 turns.",
    )
    register(
        "game:GuessTheNumber-v0-hard",
        guess,
        difficulty="hard",
        description="Guess a hidden integer in 1..50 from higher/lower hints; 7 turns.",
    )
    register(
        "game:GuessTheNumber-v0-random",
        guess,
        difficulty="random",
        description="Guess a hidden integer; easy or hard drawn at every reset.",
    )
    _register_presets(
        "Mastermind",
        "xpgym.envs.games.mastermind:MastermindEnv",
        "Crack a 4-peg code of colours 1..6 from black/white pegs; 10 turns.",
        "Crack a 3-peg code of colours 1..6 from black/white pegs; 8 turns.",
        "Crack a 5-peg code of colours 1..8 from black/white pegs; 12 turns.",
    )
    _register_presets(
        "Minesweeper",
        "xpgym.envs.games.minesweeper:MinesweeperEnv",
        "Reveal every safe cell of a 6x6 grid with 5 mines; 36 turns.",
        "Reveal every safe cell of a 5x5 grid with 3 mines; 25 turns.",
        "Reveal every safe cell of an 8x8 grid with 10 mines; 64 turns.",
    )
    _register_presets(
        "TowerOfHanoi",
        "xpgym.envs.games.tower_of_hanoi:TowerOfHanoiEnv",
        "Move a 4-disk tower from peg A to peg C; 30 turns (optimum 15).",
        "Move a 3-disk tower from peg A to peg C; 14 turns (optimum 7).",
        "Move a 5-disk tower from peg A to peg C; 62 turns (optimum 31).",
    )
    _register_presets(
        "Sudoku",
        "xpgym.envs.games.sudoku:SudokuEnv",
        "Sudoku 9x9 with 36 givens and a unique solution; 100 turns.",
        "Sudoku 4x4 (2x2 boxes) with 8 givens and a unique solution; 20 turns.",
        "Sudoku 9x9 with 30 givens and a unique solution; 100 turns.",
    )
    _register_presets(
        "Game2048",
        "xpgym.envs.games.game_2048:Game2048Env",
        "2048 on a 4x4 board: reach the 2048 tile; 3000 turns.",
        "2048 on a 4x4 board: reach the 256 tile; 500 turns.",
        "2048 on a 4x4 board: reach the 2048 tile; 3000 turns.",
    )
    _register_presets(
        "Wordle",
        "xpgym.envs.games.wordle:WordleEnv",
        "Find a hidden 5-letter word from G/Y/_ letter feedback; 6 turns.",
        "Find a hidden 4-letter word from G/Y/_ letter feedback; 8 turns.",
        "Find a hidden 6-letter word from G/Y/_ letter feedback; 6 turns.",
    )
    _register_presets(
        "Hangman",
        "xpgym.envs.games.hangman:HangmanEnv",
        "Guess a hidden 4-8 letter word letter by letter; 6 lives, 30 turns.",
        "Guess a hidden 6-8 letter word letter by letter; 8 lives, 30 turns.",
        "Guess a hidden 4-5 letter word letter by letter; 5 lives, 30 turns.",
    )
    _register_presets(
        "FifteenPuzzle",
        "xpgym.envs.games.fifteen_puzzle:FifteenPuzzleEnv",
        "Solve a 4x4 sliding puzzle scrambled by 20 moves; 60 turns.",
        "Solve a 3x3 sliding puzzle scrambled by 8 moves; 30 turns.",
        "Solve a 4x4 sliding puzzle scrambled by 40 moves; 100 turns.",
    )
    _register_presets(
        "Sokoban",
        "xpgym.envs.games.sokoban:SokobanEnv",
        "Sokoban: push 1 box onto its goal in a 7x7 room; 40 turns.",
        "Sokoban: push 1 box onto its goal in a 6x6 room; 30 turns.",
        "Sokoban: push 2 boxes onto their goals in a 7x7 room; 60 turns.",
    )
    _register_presets(
        "WordSearch",
        "xpgym.envs.games.word_search:WordSearchEnv",
        "Find 5 hidden words (E, S, SE, NE) in an 8x8 letter grid; 15 turns.",
        "Find 3 hidden words (E, S) in a 6x6 letter grid; 10 turns.",
        "Find 7 hidden words (all 8 directions) in a 10x10 letter grid; 20 turns.",
    )
    _register_presets(
        "Crosswords",
        "xpgym.envs.games.crosswords:CrosswordsEnv",
        "Crossword of 5 words (5-7 letters) with anagram clues and first letters; 15 turns.",
        "Crossword of 3 words (4-5 letters) with anagram clues and first letters; 9 turns.",
        "Crossword of 7 words (6-8 letters) with anagram clues only; 21 turns.",
    )
    register_tool_variant(
        "game:GuessTheNumber-v0",
        "xpgym.core.tools.python:PythonTool",
        "python",
        max_tool_calls=3,
        description="GuessTheNumber with a sandboxed Python tool (at most 3 calls).",
    )


def _register_presets(name: str, entry_point: str, default: str, easy: str, hard: str) -> None:
    """``game:<name>-v0`` and its ``-easy``, ``-hard`` and ``-random`` (drawn per reset)."""
    register_presets("game", name, entry_point, default, easy, hard)
