"""`ToolEnvWrapper`: give any text env a set of tools.

Each step, the wrapper decides whether the action is a tool call or an answer to the task:

1. Every tool's `Tool.parse` is asked; every ``<tool_call>`` block is read as well
   (`xpgym.core.tools.calls.find_function_calls`).
2. **The call that comes first in the text wins**, whichever tool it belongs to (ties, e.g.
   two tools claiming the same span, go to the tool listed first). A ``<tool_call>`` block
   that no tool claims (invalid JSON, no name, an unknown name) takes part too, by its
   position, so ``<tool_call>{"name": "nope"}</tool_call> <python>1</python>`` is answered
   with the unknown-tool error. A call's position is where its `ToolCall.raw` first occurs
   in the action (so `raw` must be the exact span parsed, as the `calls` helpers make it); a
   call whose `raw` is empty or not found ranks after every located call. A block counts as
   claimed when a tool's call has exactly the block's text as `raw`.
3. The winner is handled as a *tool turn*: the inner env is **not** stepped and
   ``terminated=False``. A well-formed call is executed and its output is the observation,
   whether it succeeded or failed. A malformed call (`ToolCall.error` set), an unclaimed
   ``<tool_call>`` block or an unknown tool name gives an error observation and
   ``info["invalid_action"] = True``. **An action that holds a tool call never reaches the
   task**, so a failing tool is never graded as a final answer (GEM's multi-tool bug).
4. An action with no tool call at all goes to the task: ``env.step(action)``.

A tool whose `parse` raises is a programming error: the exception propagates. A tool whose
`execute` raises (against the `Tool` contract) is reported as a failed call, logged with
its traceback at WARNING, with the infrastructure marker (`xpgym.core.errors`).

Budget: `max_tool_calls` tool turns per episode (malformed and unknown calls count: each one
cost the model a turn). The next tool call after that is not run; the episode ends with
``truncated=True``, ``info["truncated_reason"] = "max_tool_calls"`` and reward ``0.0``.
Answers to the task are never limited by this wrapper.

Rewards of a tool turn: ``tool_call_reward + tool_success_reward`` for a call that ran and
succeeded, ``tool_call_reward + tool_error_reward`` for one that ran and failed, and
``tool_error_reward`` alone for a malformed or unknown call. Rewards are added as given: pass
a negative `tool_error_reward` for a penalty.

Info keys:

* on `reset`: ``tools`` (the function schemas, for a chat template's ``tools=``),
  ``tool_instructions`` (the text appended to the observation, ``""`` if none);
* on a tool turn: ``tool_calls`` (a one-element list of ``{"name", "arguments", "ok",
  "info"}``; ``name`` is `None` for a block whose name could not be read),
  ``parsed_action`` (the call's text, `ToolCall.raw`), ``invalid_action`` (bool);
* on `reset` and on every tool turn, when a tool leases a pooled resource:
  ``resource_wait_s`` (see below);
* always: ``tool_calls_total`` (tool turns this episode) and ``tool_calls_per_tool``
  (``{tool name: turns addressed to it}``, every tool listed).

Env-bound and per-episode tools (the `Tool` hooks, see `xpgym.core.tools.base`): when it is
built, the wrapper calls each tool's `Tool.bind` with its env chain (the env it wraps, then
each inner ``.env`` that is an env: wrappers down to the unwrapped env, and a single-agent
view's multi-agent env) and keeps the tools `bind` returns (a plain
tool returns itself; ``@tool(env=...)`` returns a copy bound to the first env of its class,
and raises `TypeError` when there is none). `reset` ends the previous episode's tools
(`Tool.end_episode`), resets the env, then calls `Tool.start_episode` (``@tool(resource=...)``
leases its resource there); the facts they return, added up by key, go into the reset info
and into the info of every tool turn (``resource_wait_s``: seconds this reset waited for
pooled resources). `Tool.end_episode` also runs when the episode ends (terminated or
truncated) and at `close`, so a leased resource goes back to its pool as soon as it can.

Concurrency: `step` runs `Tool.execute` synchronously in the calling thread. Tools release
the GIL while they wait (subprocesses, sockets), so a `ThreadVectorEnv` overlaps the tool
calls of all its sub-envs on its threads. There is no ``astep``: the wrappers usually stacked
outside this one (limits, observation, statistics) are synchronous, so an async step here
could not be reached through them; use `Tool.aexecute` directly in async code.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from xpgym.core.env import Env, EnvCore, Wrapper
from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause
from xpgym.core.tools.base import Tool, ToolCall, ToolResult
from xpgym.core.tools.calls import (
    TOOL_CALL_OPEN,
    FunctionCall,
    find_function_calls,
    format_tool_instructions,
)

__all__ = ["ToolEnvWrapper"]

logger = logging.getLogger(__name__)

_TRUNCATED_REASON = "max_tool_calls"


class ToolEnvWrapper(Wrapper[str]):
    """Add tools to an env; see the module docstring for dispatch, budget and rewards.

    Args:
        env: The task env (text observations).
        tools: The tools, at least one, with distinct non-empty names. They may be shared
            with other envs (see `close_tools`).
        max_tool_calls: Tool turns allowed per episode; `None` for no limit.
        tool_call_reward: Added on every tool turn whose call ran.
        tool_success_reward: Added when the call ran and returned ``ok=True``.
        tool_error_reward: Added when the call ran and failed, or was malformed or unknown.
        instructions: `True` appends `format_tool_instructions` (each tool's tag-style
            instructions and the budget) to the first observation; a `str` appends that text;
            `False` appends nothing (e.g. when a chat template renders ``info["tools"]``).
        close_tools: `close()` also closes the tools. Use it when the tools were made for
            this env alone (`register_tool_variant` does), not when they are shared.

    Raises:
        TypeError: a tool is not a `Tool`, or `instructions` is neither bool nor str.
        ValueError: no tools, duplicate or empty names, or a negative `max_tool_calls`.
    """

    def __init__(
        self,
        env: Env,
        tools: Sequence[Tool],
        *,
        max_tool_calls: int | None = 10,
        tool_call_reward: float = 0.0,
        tool_success_reward: float = 0.0,
        tool_error_reward: float = 0.0,
        instructions: bool | str = True,
        close_tools: bool = False,
    ) -> None:
        super().__init__(env)
        tools = tuple(tools)
        if not tools:
            raise ValueError("ToolEnvWrapper needs at least one tool")
        for tool in tools:
            if not isinstance(tool, Tool):
                raise TypeError(f"tools must be Tool instances, got {type(tool).__name__}")
            if not isinstance(tool.name, str) or not tool.name:
                raise ValueError(f"{tool!r} has no name; set the class attribute `name`")
        names = [tool.name for tool in tools]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"tool names must be distinct, got {duplicates} more than once")
        if max_tool_calls is not None and (
            isinstance(max_tool_calls, bool) or not isinstance(max_tool_calls, int)
        ):
            raise ValueError(f"max_tool_calls must be an int or None, got {max_tool_calls!r}")
        if max_tool_calls is not None and max_tool_calls < 0:
            raise ValueError(f"max_tool_calls must be >= 0 or None, got {max_tool_calls}")
        if not isinstance(instructions, (bool, str)):
            raise TypeError(f"instructions must be a bool or a str, got {instructions!r:.80}")
        chain: list[EnvCore] = [env]
        while isinstance(inner := getattr(chain[-1], "env", None), EnvCore):
            chain.append(inner)
        self.tools: tuple[Tool, ...] = tuple(tool.bind(chain) for tool in tools)
        self.max_tool_calls = max_tool_calls
        self.tool_call_reward = float(tool_call_reward)
        self.tool_success_reward = float(tool_success_reward)
        self.tool_error_reward = float(tool_error_reward)
        self.instructions = instructions
        self.close_tools = close_tools
        self._total = 0
        self._per_tool = dict.fromkeys(names, 0)
        self._episode_facts: dict[str, float] = {}

    # ----------------------------------------------------------------- counters and state

    @property
    def tool_calls_total(self) -> int:
        """Tool turns taken in this episode (malformed and unknown calls included)."""
        return self._total

    @property
    def tool_calls_per_tool(self) -> dict[str, int]:
        """Tool turns addressed to each tool in this episode (a copy)."""
        return dict(self._per_tool)

    def _counts(self) -> dict[str, Any]:
        return {"tool_calls_total": self._total, "tool_calls_per_tool": dict(self._per_tool)}

    def get_wrapper_state(self) -> dict[str, Any]:
        """``{"tool_calls_total": int, "tool_calls_per_tool": {name: int}}``."""
        return self._counts()

    def set_wrapper_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `get_wrapper_state` returned."""
        self._total = int(state["tool_calls_total"])
        self._per_tool = {name: int(n) for name, n in state["tool_calls_per_tool"].items()}

    def can_fork(self) -> bool:
        """The wrapped env can fork and every tool is `Tool.forkable`."""
        return self.env.can_fork() and all(tool.forkable for tool in self.tools)

    # -------------------------------------------------------------------------- reset

    def instruction_text(self) -> str:
        """The text `reset` appends to the first observation (``""`` for none)."""
        if isinstance(self.instructions, str):
            return self.instructions
        if not self.instructions:
            return ""
        return format_tool_instructions(self.tools, max_tool_calls=self.max_tool_calls)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Reset the env and the counters; append the tool instructions to the observation.

        Raises:
            TypeError: instructions are to be appended but the observation is not a `str`.
        """
        self._end_episode()
        obs, info = self.env.reset(seed=seed, options=options)
        facts: dict[str, float] = {}
        try:
            for tool in self.tools:
                for key, value in tool.start_episode().items():
                    facts[key] = facts.get(key, 0.0) + value
        except BaseException:
            self._end_episode()  # give back what the tools before it leased
            raise
        self._episode_facts = facts
        self._total = 0
        self._per_tool = dict.fromkeys(self._per_tool, 0)
        text = self.instruction_text()
        if text:
            if not isinstance(obs, str):
                raise TypeError(
                    f"ToolEnvWrapper appends tool instructions to a str observation, got "
                    f"{type(obs).__name__}; pass instructions=False and use info['tools']"
                )
            obs = f"{obs}\n\n{text}" if obs else text
        info = {
            **info,
            "tools": [tool.function_schema() for tool in self.tools],
            "tool_instructions": text,
            **facts,
            **self._counts(),
        }
        return obs, info

    # --------------------------------------------------------------------------- step

    def _first_call(self, action: str) -> tuple[Tool | None, ToolCall | FunctionCall] | None:
        """The call that owns `action`: ``(tool, call)``, ``(None, unclaimed block)`` or `None`.

        Raises:
            TypeError: a tool's `parse` returned something other than a `ToolCall` or `None`.
        """
        end = len(action)
        best: tuple[int, int, Tool | None, ToolCall | FunctionCall] | None = None
        claimed: set[str] = set()
        for order, tool in enumerate(self.tools):
            call = tool.parse(action)
            if call is None:
                continue
            if not isinstance(call, ToolCall):
                raise TypeError(
                    f"{tool!r}.parse() must return a ToolCall or None, got {type(call).__name__}"
                )
            claimed.add(call.raw)
            position = action.find(call.raw) if call.raw else -1
            candidate = (position if position >= 0 else end, order, tool, call)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
        if TOOL_CALL_OPEN in action:
            for block in find_function_calls(action):
                if block.raw in claimed:
                    continue
                if best is None or block.start < best[0]:
                    best = (block.start, -1, None, block)
                break  # blocks come in order: the first unclaimed one is the only candidate
        return None if best is None else (best[2], best[3])

    def _unclaimed_message(self, block: FunctionCall) -> str:
        available = ", ".join(tool.name for tool in self.tools)
        if block.error is not None:
            return (
                f'Invalid tool call: {block.error}. Write {TOOL_CALL_OPEN}{{"name": ..., '
                f'"arguments": {{...}}}}</tool_call> with one JSON object. Available tools: '
                f"{available}."
            )
        if any(tool.name == block.name for tool in self.tools):
            return (
                f"Tool {block.name!r} does not take {TOOL_CALL_OPEN} calls; call it as its "
                f"instructions say. Available tools: {available}."
            )
        return f"Unknown tool {block.name!r}. Available tools: {available}."

    def _execute(self, tool: Tool, call: ToolCall) -> ToolResult:
        """Run `call`; a tool that raises or returns a non-`ToolResult` counts as failed."""
        try:
            result = tool.execute(call)
        except Exception as exc:
            logger.warning("tool %r raised while executing a call", tool.name, exc_info=True)
            error = f"{type(exc).__name__}: {exc}"
            return ToolResult(
                f"Tool {tool.name!r} failed: {error}",
                ok=False,
                info={
                    "exception": type(exc).__name__,
                    INFRA_ERROR_KEY: InfraCause("tool_backend_error", error).to_dict(),
                },
            )
        if not isinstance(result, ToolResult):
            logger.warning("tool %r returned %s, not a ToolResult", tool.name, type(result))
            return ToolResult(
                f"Tool {tool.name!r} failed: it returned no result.",
                ok=False,
                info={"exception": "TypeError"},
            )
        return result

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Run the first tool call in `action`, or pass the action to the task.

        Returns:
            For a tool turn: ``(tool output or error, tool reward, False, False, info)``, or
            ``(budget message, 0.0, False, True, info)`` when the budget is spent. For a task
            turn: the env's step, with the counters added to a new info dict.
        """
        found = self._first_call(action)
        if found is None:
            obs, reward, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                self._end_episode()
            return obs, reward, terminated, truncated, {**info, **self._counts()}
        tool, call = found
        if self.max_tool_calls is not None and self._total >= self.max_tool_calls:
            logger.debug("tool call budget of %d spent; truncating", self.max_tool_calls)
            obs = (
                f"Tool call limit reached: at most {self.max_tool_calls} tool calls per "
                "episode. The episode has ended."
            )
            info = {
                "parsed_action": call.raw,
                "invalid_action": False,
                "truncated_reason": _TRUNCATED_REASON,
                **self._counts(),
            }
            self._end_episode()
            return obs, 0.0, False, True, info
        self._total += 1
        if tool is None:
            assert isinstance(call, FunctionCall)
            obs = self._unclaimed_message(call)
            record = {
                "name": call.name,
                "arguments": dict(call.arguments),
                "ok": False,
                "info": {"error": obs},
            }
            return obs, self.tool_error_reward, False, False, self._tool_info(call.raw, record)
        assert isinstance(call, ToolCall)
        self._per_tool[tool.name] += 1
        if call.error is not None:
            obs = f"Invalid call of tool {tool.name!r}: {call.error}"
            record = {
                "name": call.tool,
                "arguments": dict(call.arguments),
                "ok": False,
                "info": {"error": call.error},
            }
            return obs, self.tool_error_reward, False, False, self._tool_info(call.raw, record)
        result = self._execute(tool, call)
        reward = self.tool_call_reward + (
            self.tool_success_reward if result.ok else self.tool_error_reward
        )
        record = {
            "name": call.tool,
            "arguments": dict(call.arguments),
            "ok": bool(result.ok),
            "info": dict(result.info),
        }
        info = self._tool_info(call.raw, record, invalid=False)
        return str(result.observation), reward, False, False, info

    def _tool_info(
        self, raw: str, record: dict[str, Any], *, invalid: bool = True
    ) -> dict[str, Any]:
        return {
            "tool_calls": [record],
            "parsed_action": raw,
            "invalid_action": invalid,
            **self._episode_facts,
            **self._counts(),
        }

    def _end_episode(self) -> None:
        for tool in self.tools:
            tool.end_episode()

    def close(self) -> None:
        """End the tools' episode, close the env, and the tools too when `close_tools` is set."""
        try:
            self._end_episode()
            self.env.close()
        finally:
            if self.close_tools:
                for tool in self.tools:
                    tool.close()
