"""xpgym: a gym for agentic LLMs.

`import xpgym` is cheap: it registers the built-in env ids (entry points are imported only
by `make`), imports numpy and nothing heavier, configures no logging and prints nothing.

Quick start::

    import xpgym

    env = xpgym.make("game:GuessTheNumber-v0")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.sample_random_action())
"""

from __future__ import annotations

import importlib
from typing import Any

from xpgym.core.env import Env, EpisodeFinishedError, ResetNeededError, Wrapper
from xpgym.core.registry import (
    EnvSpec,
    UnknownEnvError,
    list_envs,
    make,
    make_vec,
    register,
    spec,
)
from xpgym.envs import register_builtin_envs
from xpgym.remote import register_remote_scheme

__version__ = "0.1.0.dev0"

__all__ = [
    "AgentSelector",
    "AutoresetMode",
    "Env",
    "EnvSpec",
    "EpisodeFinishedError",
    "MultiAgentEnv",
    "ProcessVectorEnv",
    "ResetNeededError",
    "SyncVectorEnv",
    "ThreadVectorEnv",
    "UnknownEnvError",
    "VectorEnv",
    "Wrapper",
    "check_env",
    "check_multiagent_env",
    "list_envs",
    "make",
    "make_vec",
    "register",
    "spec",
]

# Names imported on first use, so `import xpgym` stays cheap (no threads, no multiprocessing).
_LAZY = {
    "AutoresetMode": "xpgym.core.vector",
    "VectorEnv": "xpgym.core.vector",
    "SyncVectorEnv": "xpgym.core.vector",
    "ThreadVectorEnv": "xpgym.core.vector",
    "ProcessVectorEnv": "xpgym.core.vector",
    "MultiAgentEnv": "xpgym.core.multiagent",
    "AgentSelector": "xpgym.core.multiagent",
    "check_env": "xpgym.core.checks",
    "check_multiagent_env": "xpgym.core.checks",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'xpgym' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


register_builtin_envs()
register_remote_scheme()  # by name: imports neither xpgym.remote.client nor the server
