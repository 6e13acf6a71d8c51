"""Rewards as plain callables, and how a trajectory's rewards are aggregated.

A **reward function** is any callable, sync or ``async``, that declares by its parameter
names which facts about a step it needs (AgentFly's reward functions; the wrapper that
applies them is `xpgym.core.wrappers.RewardWrapper`). The facts (`RewardContext`):

==================== ==========================================================
``action``           the policy's text for this step
``observation``      the observation that action answered (`Turn.observation`)
``next_observation`` the observation the step returned
``reward``           the env's own reward for the step
``info``             the step's info
``turn``             the step's index in the episode, from 0
``turns``            the episode's earlier steps, as `Turn`\\ s (oldest first)
``terminated``       the env's flags for the step
``truncated``
``final``            ``terminated or truncated``
``env``              the unwrapped env: passed **only** to a function with a
                     parameter named ``env`` (state-based checks)
==================== ==========================================================

A function with ``**kwargs`` receives every fact but ``env``. A parameter that is none of
these and has no default is an error when the `Reward` is built.

A reward function returns a real number, or a mapping ``{"reward": r, **metrics}`` whose
values are real numbers (``metrics`` are logged, never trained on). An ``async`` function
(or one that returns an awaitable) is awaited on xpgym's reward event loop, a daemon thread
shared by the process (`run_awaitables`), so a synchronous ``env.step`` can use it from any
thread, also from inside a running event loop, which keeps running while the step waits when
the step runs in a worker thread (``asyncio.to_thread``, as `xpgym.rollout.runner`
does); the clients an async reward opens all live on that one loop.

Aggregators (`RewardAggregator`) turn the per-step values ``v_0 .. v_T`` of a trajectory
into per-step rewards ``r_t``:

* ``"sum"``: ``r_t = v_t``; the return is ``sum(v)``.
* ``"last"``: ``r_t = 0`` for ``t < T``, ``r_T = v_T``; the return is ``v_T`` (outcome
  rewards).
* ``"max"``: ``r_t = M_t - M_{t-1}`` with the running maximum ``M_t = max(v_0 .. v_t)`` and
  ``r_0 = v_0``; the return is ``max(v)`` (ScienceWorld's partial credit: the best score
  reached at any point).
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from xpgym.core.trajectory import Turn

if TYPE_CHECKING:
    import asyncio

    from xpgym.core.env import Env

__all__ = [
    "AGGREGATES",
    "CONTEXT_FIELDS",
    "Aggregate",
    "Reward",
    "RewardAggregator",
    "RewardContext",
    "RewardOutput",
    "first_well_formed_tool_call",
    "parse_reward_output",
    "run_awaitables",
    "well_formed_tool_call",
]

Aggregate = Literal["sum", "last", "max"]
AGGREGATES: tuple[str, ...] = ("sum", "last", "max")
"""The aggregator names (see the module docstring)."""

CONTEXT_FIELDS: tuple[str, ...] = (
    "action",
    "observation",
    "next_observation",
    "reward",
    "info",
    "turn",
    "turns",
    "terminated",
    "truncated",
    "final",
    "env",
)
"""The parameter names a reward function may declare (see the module docstring)."""


@dataclass(frozen=True)
class RewardContext:
    """What a reward function may ask for about one step (see the module docstring).

    Attributes:
        action, observation, next_observation, reward, info, turn, turns, terminated,
        truncated: As in the module docstring's table.
        env: The unwrapped env; handed only to functions that declare ``env``.
    """

    action: str
    observation: Any
    next_observation: Any
    reward: float
    info: Mapping[str, Any]
    turn: int
    turns: tuple[Turn, ...]
    terminated: bool
    truncated: bool
    env: Env | None = None

    @property
    def final(self) -> bool:
        """Whether the step ended the episode (``terminated or truncated``)."""
        return self.terminated or self.truncated


@dataclass(frozen=True)
class RewardOutput:
    """A reward function's result, checked.

    Attributes:
        reward: The reward, a finite float.
        metrics: The extra metrics, ``{name: finite float}`` (empty for a plain number).
    """

    reward: float
    metrics: dict[str, float] = field(default_factory=dict)


def _finite(value: Any, what: str) -> float:
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a real number, got {value!r:.80}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} must be finite, got {number!r}")
    return number


def parse_reward_output(value: Any, name: str) -> RewardOutput:
    """Check what reward function `name` returned: a real number, or a mapping with a
    ``"reward"`` number and other numbers as metrics (keys must be non-empty `str`).

    Raises:
        TypeError: `value` is neither, a key is not a `str`, or a value not a real number.
        ValueError: the mapping has no ``"reward"``, a key is empty, or a number is not
            finite.
    """
    if not isinstance(value, Mapping):
        return RewardOutput(_finite(value, f"the value of reward {name!r}"))
    if "reward" not in value:
        raise ValueError(
            f"reward {name!r} returned a mapping without a 'reward' key (keys: "
            f"{sorted(map(str, value))}); return {{'reward': r, **metrics}} or a number"
        )
    metrics = {}
    for key, metric in value.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"reward {name!r} returned a metric key {key!r}; use a non-empty str")
        if key != "reward":
            metrics[key] = _finite(metric, f"metric {key!r} of reward {name!r}")
    return RewardOutput(_finite(value["reward"], f"the 'reward' of reward {name!r}"), metrics)


class Reward:
    """A reward function with its weight and name, called with the facts it declares.

    Args:
        fn: The callable (see the module docstring for what it may declare and return).
        weight: Its weight in the weighted sum of a `RewardWrapper`'s rewards.
        name: Its name in ``info["metrics"]``; default ``fn.__name__`` (a class instance:
            its class name).
        timeout_s: For an async `fn`: seconds after which its call is cancelled and counts
            as a ``"grader_timeout"``; `None`: no limit. A sync `fn` cannot be interrupted.

    Attributes:
        fn, weight, name, timeout_s: As given.
        parameters: The context fields `fn` receives, in its signature's order.
        wants_env: Whether `fn` declares ``env``.

    Raises:
        TypeError: `fn` is not callable, or it has a required parameter that is not a
            context field (or positional-only).
        ValueError: `name` is empty, `weight` is not finite or `timeout_s` is not positive.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        weight: float = 1.0,
        name: str | None = None,
        timeout_s: float | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"a reward must be callable, got {fn!r:.80}")
        self.fn = fn
        self.weight = _finite(weight, "weight")
        if name is None:
            name = getattr(fn, "__name__", None) or type(fn).__name__
        if not isinstance(name, str) or not name:
            raise ValueError(f"a reward's name must be a non-empty str, got {name!r}")
        self.name = name
        if timeout_s is not None and not _finite(timeout_s, "timeout_s") > 0:
            raise ValueError(f"timeout_s must be positive or None, got {timeout_s!r}")
        self.timeout_s = timeout_s
        self.parameters, self.wants_env = _declared_fields(fn, name)

    def __repr__(self) -> str:
        return f"Reward({self.name!r}, weight={self.weight}, parameters={self.parameters})"

    def call(self, context: RewardContext) -> Any:
        """Call `fn` with the fields it declares; returns what it returns (an awaitable
        for an async function, bounded by `timeout_s`: await it, or pass it to
        `run_awaitables`)."""
        values = {name: getattr(context, name) for name in self.parameters}
        result = self.fn(**values)
        if self.timeout_s is not None and inspect.isawaitable(result):
            import asyncio  # not at module level: `import xpgym` stays light

            return asyncio.wait_for(result, self.timeout_s)
        return result


def _declared_fields(fn: Callable[..., Any], name: str) -> tuple[tuple[str, ...], bool]:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as err:
        raise TypeError(f"cannot read the signature of reward {name!r}: {err}") from None
    declared: list[str] = []
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            declared.extend(f for f in CONTEXT_FIELDS if f != "env" and f not in declared)
        elif parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        elif parameter.name in CONTEXT_FIELDS and parameter.kind is not (
            inspect.Parameter.POSITIONAL_ONLY
        ):
            if parameter.name not in declared:
                declared.append(parameter.name)
        elif parameter.default is inspect.Parameter.empty:
            raise TypeError(
                f"reward {name!r} has a required parameter {parameter.name!r} that xpgym "
                f"cannot fill; a reward may declare {', '.join(CONTEXT_FIELDS)} (by keyword)"
            )
    return tuple(declared), "env" in declared


def well_formed_tool_call(info: Mapping[str, Any]) -> float:
    """1.0 when the step was a well-formed tool call (``info["tool_calls"]`` present and
    non-empty, ``info["invalid_action"]`` not set), else 0.0: the format reward of
    `RewardWrapper(format_reward=<float>)`, as AgentFly's +0.1 for calling a tool."""
    return float(bool(info.get("tool_calls")) and not info.get("invalid_action"))


def first_well_formed_tool_call(info: Mapping[str, Any], turns: Sequence[Turn]) -> float:
    """1.0 on the episode's first step that is a well-formed tool call
    (`well_formed_tool_call`), else 0.0: a format reward paid once per episode, as
    AgentFly's +0.1 "if the model calls at least one tool"."""
    if any(well_formed_tool_call(turn.info) for turn in turns):
        return 0.0
    return well_formed_tool_call(info)


class RewardAggregator:
    """Turns a trajectory's per-step values into per-step rewards (module docstring).

    Call `reset` at the start of an episode and `step` once per env step.

    Args:
        how: ``"sum"``, ``"last"`` or ``"max"``.

    Attributes:
        how: As given.
        running: The episode's aggregate so far (``sum``: the sum of the values; ``last``:
            the latest value; ``max``: the running maximum); 0.0 before the first value.

    Raises:
        ValueError: `how` is not one of `AGGREGATES`.
    """

    def __init__(self, how: Aggregate = "sum") -> None:
        if how not in AGGREGATES:
            raise ValueError(f"unknown reward aggregate {how!r}; use one of {AGGREGATES}")
        self.how = how
        self.reset()

    def reset(self) -> None:
        """Forget the episode."""
        self.running = 0.0
        self._seen = False

    def step(self, value: float | None, final: bool) -> float:
        """The reward of a step whose value is `value` (`None`: not computed this step,
        which gives 0.0 and leaves the aggregate as it was); `final`: the step ends the
        episode."""
        if value is None:
            return 0.0
        if self.how == "sum":
            self.running += value
            reward = value
        elif self.how == "last":
            self.running = value
            reward = value if final else 0.0
        else:
            previous = self.running
            self.running = value if not self._seen else max(previous, value)
            reward = self.running - previous if self._seen else value
        self._seen = True
        return reward

    def get_state(self) -> dict[str, Any]:
        """``{"running": float, "seen": bool}``."""
        return {"running": self.running, "seen": self._seen}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `get_state` returned."""
        self.running = float(state["running"])
        self._seen = bool(state["seen"])


# ------------------------------------------------------------------- the reward event loop

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None


def _reward_loop() -> asyncio.AbstractEventLoop:
    """The process's reward event loop, started on first use (again after a fork)."""
    import asyncio

    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop_pid != os.getpid() or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="xpgym-rewards", daemon=True)
            thread.start()
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def run_awaitables(awaitables: Sequence[Awaitable[Any]]) -> list[Any]:
    """Await `awaitables` concurrently on the reward event loop and wait for them all.

    Callable from any thread, also one whose event loop is running (that loop is not
    needed: the awaitables run on the reward loop's thread). Returns their results in
    order; an awaitable that raised gives its exception in its place (the others still
    run to the end).

    Raises:
        RuntimeError: called from the reward loop itself (it would wait for itself).
    """
    if not awaitables:
        return []
    import asyncio

    loop = _reward_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise RuntimeError(
            "run_awaitables was called from xpgym's reward event loop (a reward stepped an "
            "env with rewards); await the reward functions directly there"
        )

    async def gather() -> list[Any]:
        return await asyncio.gather(*awaitables, return_exceptions=True)

    return asyncio.run_coroutine_threadsafe(gather(), loop).result()
