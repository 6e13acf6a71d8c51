"""The environment catalogue.

Each family registers its ids in its package's `register_envs()` with string entry points,
so importing this package imports no env module.
"""

from __future__ import annotations

from xpgym.envs import code, games, math, multiagent, qa, reasoning_gym, terminal, vision, world

_registered = False


def register_builtin_envs() -> None:
    """Register every built-in env id (idempotent; called by `import xpgym`)."""
    global _registered
    if _registered:
        return
    _registered = True
    games.register_envs()
    multiagent.register_envs()
    math.register_envs()
    vision.register_envs()
    code.register_envs()
    terminal.register_envs()
    qa.register_envs()
    reasoning_gym.register_envs()
    world.register_envs()
