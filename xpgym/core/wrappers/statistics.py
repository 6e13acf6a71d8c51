"""Wrappers that measure episodes and report the numbers in `info`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from xpgym.core.env import Env, Wrapper

__all__ = ["EpisodeStatistics", "count_tool_calls"]


def count_tool_calls(value: Any) -> int:
    """How many tool calls an ``info["tool_calls"]`` value stands for.

    A `list` or `tuple` counts its length (one entry per call); an `int` is the count itself
    (`True` counts 1, `False` 0); `None` or a missing key counts 0; any other value counts 1
    if truthy (e.g. a single call as a dict), else 0.
    """
    if value is None:
        return 0
    if isinstance(value, (list, tuple)):
        return len(value)
    if isinstance(value, int):
        return int(value)
    return 1 if value else 0


class EpisodeStatistics(Wrapper[Any]):
    """Add ``info["episode"]`` on the step that ends an episode (terminated or truncated).

    ``info["episode"] = {"return": float, "length": int, "tool_calls": int,
    "invalid_actions": int, "invalid_action_rate": float, "time": float}``:

    * ``return``: sum of the episode's rewards; ``length``: its number of steps;
    * ``tool_calls``: sum over steps of `count_tool_calls` of ``info.get("tool_calls")``;
    * ``invalid_actions``: steps whose ``info.get("invalid_action")`` is truthy;
      ``invalid_action_rate``: ``invalid_actions / length`` (in ``[0, 1]``);
    * ``time``: seconds from the end of `reset()` to the end of the last step, on a
      monotonic clock (`clock`, default `time.monotonic`), so it includes the policy's time.

    The info returned on that step is a new dict; the env's is not modified. Place this
    wrapper outside the limit wrappers so it sees their truncation. The running sums and the
    elapsed time are wrapper state (the time is stored as elapsed seconds, so a snapshot
    restored in another process stays meaningful).
    """

    def __init__(self, env: Env, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(env)
        self.clock = clock
        self._return = 0.0
        self._length = 0
        self._tool_calls = 0
        self._invalid_actions = 0
        self._start = clock()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        result = self.env.reset(seed=seed, options=options)
        self._return = 0.0
        self._length = 0
        self._tool_calls = 0
        self._invalid_actions = 0
        self._start = self.clock()
        return result

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        self._tool_calls += count_tool_calls(info.get("tool_calls"))
        self._invalid_actions += bool(info.get("invalid_action"))
        if terminated or truncated:
            info = {
                **info,
                "episode": {
                    "return": self._return,
                    "length": self._length,
                    "tool_calls": self._tool_calls,
                    "invalid_actions": self._invalid_actions,
                    "invalid_action_rate": self._invalid_actions / self._length,
                    "time": self.clock() - self._start,
                },
            }
        return obs, reward, terminated, truncated, info

    def get_wrapper_state(self) -> dict[str, float | int]:
        """The running sums and ``elapsed`` seconds since this episode's reset."""
        return {
            "return": self._return,
            "length": self._length,
            "tool_calls": self._tool_calls,
            "invalid_actions": self._invalid_actions,
            "elapsed": self.clock() - self._start,
        }

    def set_wrapper_state(self, state: dict[str, float | int]) -> None:
        """Restore what `get_wrapper_state` returned; the clock resumes from ``elapsed``."""
        self._return = float(state["return"])
        self._length = int(state["length"])
        self._tool_calls = int(state["tool_calls"])
        self._invalid_actions = int(state["invalid_actions"])
        self._start = self.clock() - float(state["elapsed"])
