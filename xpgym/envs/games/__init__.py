"""Language games. Ids: ``game:<Name>-v0[-easy|-hard|-random]``, tool variants ``...-python``."""

from __future__ import annotations

from xpgym.core.registry import register
from xpgym.core.tools.variants import register_tool_variant


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
    register_tool_variant(
        "game:GuessTheNumber-v0",
        "xpgym.core.tools.python:PythonTool",
        "python",
        max_tool_calls=3,
        description="GuessTheNumber with a sandboxed Python tool (at most 3 calls).",
    )
