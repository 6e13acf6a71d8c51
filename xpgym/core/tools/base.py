"""The `Tool` contract: parse an action into a call, execute it, return an observation.

A tool owns a *format*. Two formats exist (see `xpgym.core.tools.calls`):

* tag style, e.g. ``<python>print(1)</python>`` or ``<search>capital of France</search>``;
* JSON function calls, ``<tool_call>{"name": "python", "arguments": {"code": "..."}}
  </tool_call>``, what Qwen/Hermes-style chat templates emit.

`parse` returns `None` when the action is not addressed to this tool at all; it returns a
`ToolCall` with `error` set when the action *is* addressed to it but is malformed (bad JSON,
missing or mistyped arguments). The tool wrapper turns such a call into an observation that
says what was wrong and marks ``info["invalid_action"] = True``; it never falls through to
the task.

`execute` never raises for a problem caused by the model's input (a crash, a timeout, a
server error): it returns a `ToolResult` with ``ok=False`` and the error as observation.
It raises only for programming errors (e.g. executing a call that has `error` set).

Episode hooks (for tools that need the episode's env or a per-episode backend; the defaults
do nothing, so a plain tool ignores them). `xpgym.core.wrappers.tools.ToolEnvWrapper` calls:

* `bind` once, when it is built, with its env chain (the env it wraps, then each inner
  ``.env`` that is an env, down to the unwrapped env); it keeps the tool `bind` returns. A
  tool that needs per-wrapper state returns a bound copy and never changes itself: the tool
  object may be shared by many envs and threads;
* `start_episode` on the bound tool at every `reset` (facts it returns go into the reset
  info), and `end_episode` when the episode ends (terminated or truncated), before the next
  reset and at `close`.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xpgym.core.env import EnvCore

__all__ = ["Tool", "ToolCall", "ToolResult"]


@dataclass(frozen=True)
class ToolCall:
    """One parsed call of one tool.

    Attributes:
        tool: The tool's `name`.
        arguments: JSON-compatible arguments (``{"code": ...}``, ``{"query": ...}``, ...).
        raw: The exact span of the action that was parsed (recorded as `parsed_action`).
        error: Why the call is malformed, or `None` for a well-formed call.
    """

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    raw: str = ""
    error: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """What executing a call produced.

    Attributes:
        observation: Text for the model (already truncated to the tool's output cap).
        ok: `False` when the call failed (exception, non-zero exit, timeout, server error).
        info: Facts for logs and rewards (e.g. ``{"exit_reason": "timeout",
            "duration_s": 1.2}``); JSON-compatible.
    """

    observation: str
    ok: bool = True
    info: Mapping[str, Any] = field(default_factory=dict)


class Tool(abc.ABC):
    """Base class for tools. Subclasses set `name` and implement the abstract methods.

    A tool instance may be shared by many envs and threads: `execute` must be thread-safe
    and keep no per-episode state (per-episode state belongs to the env or the wrapper).

    `forkable` (class attribute, default `True`): whether an episode that calls this tool
    can be forked (`xpgym.core.env.Env.can_fork`): `False` for a tool whose calls change
    state outside the process that no env snapshot holds (an MCP server's session data).
    """

    name: str = ""
    description: str = ""
    forkable: bool = True

    @abc.abstractmethod
    def instructions(self) -> str:
        """Prompt text that tells the model how to call this tool (tag style)."""

    @abc.abstractmethod
    def function_schema(self) -> dict[str, Any]:
        """The tool as a JSON-schema function, for chat templates' ``tools=`` argument:
        ``{"type": "function", "function": {"name", "description", "parameters"}}``."""

    @abc.abstractmethod
    def parse(self, action: str) -> ToolCall | None:
        """The call in `action` addressed to this tool, or `None` if there is none."""

    @abc.abstractmethod
    def execute(self, call: ToolCall) -> ToolResult:
        """Run a well-formed call (``call.error is None``); see the module docstring."""

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """`execute` without blocking the event loop (default: in a worker thread)."""
        import asyncio  # here, not at module level: `import xpgym` stays cheap

        return await asyncio.to_thread(self.execute, call)

    def bind(self, envs: Sequence[EnvCore]) -> Tool:
        """The tool to use with the env chain `envs` (outermost first); default: `self`.

        Raises:
            TypeError: the tool needs an env that is not in `envs`.
        """
        del envs
        return self

    def start_episode(self) -> Mapping[str, float]:
        """Called at the start of every episode of a bound tool; returns facts for the reset
        info (e.g. ``{"resource_wait_s": 0.2}``; the wrapper adds up equal keys of its
        tools). Default: nothing to do, ``{}``."""
        return {}

    def end_episode(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Called when the episode ends, before the next reset and at close; idempotent."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release processes, connections and files. Safe to call more than once."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
