"""Language games. Ids: ``game:<Name>-v0[-easy|-hard|-random]``."""

from __future__ import annotations

from xpgym.core.registry import register


def register_envs() -> None:
    """Register the game ids; entry points are imported only by `xpgym.make`."""
    guess = "xpgym.envs.games.guess_the_number:GuessTheNumberEnv"
    register(
        "game:GuessTheNumber-v0",
        guess,
        min_number=1,
        max_number=20,
        max_turns=7,
        description="Find a hidden integer from higher/lower feedback.",
    )
    register(
        "game:GuessTheNumber-v0-easy",
        guess,
        min_number=1,
        max_number=10,
        max_turns=4,
        description="GuessTheNumber over 1..10 in 4 turns.",
    )
    register(
        "game:GuessTheNumber-v0-hard",
        guess,
        min_number=1,
        max_number=50,
        max_turns=7,
        description="GuessTheNumber over 1..50 in 7 turns.",
    )
    register(
        "game:GuessTheNumber-v0-random",
        guess,
        difficulty="random",
        description="GuessTheNumber with easy or hard drawn at every reset.",
    )
