"""`available_actions`: the env's admissible actions as a tool (AgentGym's "check available
actions", AgentFly's admissible-commands tool).

``ToolEnvWrapper(env, [available_actions])`` lets the model call
``<tool_call>{"name": "available_actions"}</tool_call>``; the observation is the JSON list
`Env.available_actions` returns for the env the wrapper wraps (wrappers forward it to the
env that lists them). An env that does not list its actions (`None`) gives ``ok=False`` with
an error observation. The tool is bound per wrapper (``@tool(env=Env)``), so this one object
serves every env.
"""

from __future__ import annotations

from xpgym.core.env import Env
from xpgym.core.tools.base import Tool
from xpgym.core.tools.decorator import ToolError, tool

__all__ = ["available_actions", "available_actions_tools"]


@tool(env=Env, name="available_actions")
def available_actions(env: Env) -> list[str]:
    """List the actions the environment accepts in its current state."""
    actions = env.available_actions()
    if actions is None:
        raise ToolError(
            f"Error: this environment ({type(env.unwrapped).__name__}) does not list its "
            "available actions."
        )
    return list(actions)


def available_actions_tools() -> list[Tool]:
    """The tools factory of the ``-actions`` tool variants (`register_tool_variant`):
    ``[available_actions]`` (one shared object is fine: it is bound per wrapper)."""
    return [available_actions]
