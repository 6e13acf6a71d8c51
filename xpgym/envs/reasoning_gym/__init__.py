"""reasoning-gym tasks. Ids: ``rg:<task>-v0``, one per task of the installed reasoning-gym.

``<task>`` is a name in ``reasoning_gym.factory.DATASETS`` (``rg:letter_counting-v0``,
``rg:arc_1d-v0``, ...; 105 tasks in reasoning-gym 0.1.25). ``composite``, a weighted mix of
other tasks that has no default configuration, is left out. Every id is a
`xpgym.envs.reasoning_gym.env.ReasoningGymEnv`.

The ids form a registry *family* (`xpgym.core.registry.register_family`): importing xpgym
does not import reasoning_gym (about two seconds); the ids are enumerated the first time
one is made or a listing names the category (``xpgym list rg:``; ``xpgym list`` asks for every
family). So `list_envs()` without a pattern and the env table of docs/envs.md do not show
them, and the set always matches the installed reasoning-gym version, with no list to keep
up to date here.
"""

from __future__ import annotations

import re

from xpgym.core.optional import import_optional
from xpgym.core.registry import EnvSpec, register_family

__all__ = ["CATEGORY", "EXCLUDED_TASKS", "family_specs", "register_envs"]

CATEGORY = "rg"
EXCLUDED_TASKS = frozenset({"composite"})
"""reasoning-gym datasets that get no id (they cannot be built without a configuration)."""

_ENTRY_POINT = "xpgym.envs.reasoning_gym.env:ReasoningGymEnv"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.]*")


def register_envs() -> None:
    """Register the ``rg:`` family; nothing is imported until one of its ids is needed."""
    register_family(CATEGORY, "xpgym.envs.reasoning_gym:family_specs")


def family_specs() -> list[EnvSpec]:
    """One `EnvSpec` per task of the installed reasoning-gym (imports it).

    Raises:
        ImportError: reasoning-gym is not installed (the message names the extra).
    """
    rg = import_optional(
        "reasoning_gym", needed_by="the rg: envs", install='pip install "xpgym[envs]"'
    )
    return [
        EnvSpec(
            id=f"{CATEGORY}:{task}-v0",
            entry_point=_ENTRY_POINT,
            kwargs={"task": task},
            description=f"reasoning-gym task {task}: one generated question, scored by the task.",
        )
        for task in sorted(rg.factory.DATASETS)
        if task not in EXCLUDED_TASKS and _NAME.fullmatch(task)
    ]
