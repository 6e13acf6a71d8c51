"""Wrappers that end episodes at a turn limit: a fixed one, or one that grows during training.

A limit ends an episode with ``truncated=True`` and names itself in
``info["truncated_reason"]``. It never overrides a real ending: if the env terminated (or
truncated for its own reason) on the same step, its flags and info are returned unchanged.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from xpgym.core.env import Env, Wrapper

__all__ = ["HorizonSchedule", "LinearTurnSchedule", "MaxTurns", "PiecewiseTurnSchedule"]

logger = logging.getLogger(__name__)


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_positive_int(name: str, value: Any) -> int:
    if not _is_int(value) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


def _check_non_negative_int(name: str, value: Any) -> int:
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return int(value)


class _TurnLimit(Wrapper[Any]):
    """Counts the turns of an episode and truncates when `_episode_cap` is reached."""

    _reason: str = ""

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self._turns = 0
        self._episode_cap = 1

    def _start_episode(self) -> None:
        """Called at the start of every `reset`, before the env is reset."""

    @property
    def elapsed_turns(self) -> int:
        """Steps taken in the current episode."""
        return self._turns

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self._start_episode()
        self._turns = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._turns += 1
        if self._turns >= self._episode_cap and not (terminated or truncated):
            logger.debug("%s: truncating after %d turns", type(self).__name__, self._turns)
            truncated = True
            info = {**info, "truncated_reason": self._reason}
        return obs, reward, terminated, truncated, info


class MaxTurns(_TurnLimit):
    """Truncate the episode after `max_turns` steps.

    On the `max_turns`-th step of an episode, returns ``truncated=True`` and a new `info` with
    ``info["truncated_reason"] = "max_turns"``, unless the env itself ended the episode on
    that step (then its ``terminated``/``truncated`` and info are kept). The turn counter is
    wrapper state and restarts at `reset`.

    Raises:
        ValueError: `max_turns` is not a positive int.
    """

    _reason = "max_turns"

    def __init__(self, env: Env, max_turns: int) -> None:
        super().__init__(env)
        self._episode_cap = _check_positive_int("max_turns", max_turns)

    @property
    def max_turns(self) -> int:
        """The turn limit."""
        return self._episode_cap

    def get_wrapper_state(self) -> dict[str, int]:
        """``{"turns": steps taken this episode}``."""
        return {"turns": self._turns}

    def set_wrapper_state(self, state: dict[str, int]) -> None:
        """Restore what `get_wrapper_state` returned."""
        self._turns = int(state["turns"])


@dataclass(frozen=True)
class PiecewiseTurnSchedule:
    """Turn caps that switch at given training steps.

    ``PiecewiseTurnSchedule(caps=(5, 10, 20), boundaries=(100, 200))`` gives 5 turns for
    steps ``0..99``, 10 for ``100..199`` and 20 from step 200 on: ``caps[i]`` holds from
    ``boundaries[i-1]`` (inclusive) to ``boundaries[i]`` (exclusive).

    Raises:
        ValueError: a cap is not a positive int, a boundary not a positive int, the
            boundaries are not strictly increasing, or ``len(boundaries) != len(caps) - 1``.
    """

    caps: Sequence[int]
    boundaries: Sequence[int] = ()

    def __post_init__(self) -> None:
        caps = tuple(_check_positive_int("each cap", c) for c in self.caps)
        bounds = tuple(_check_positive_int("each boundary", b) for b in self.boundaries)
        if not caps or len(bounds) != len(caps) - 1:
            raise ValueError(
                f"need one boundary fewer than caps (a boundary is the step where the next cap "
                f"starts), got caps={list(caps)} and boundaries={list(bounds)}"
            )
        if any(a >= b for a, b in itertools.pairwise(bounds)):
            raise ValueError(f"boundaries must be strictly increasing, got {list(bounds)}")
        object.__setattr__(self, "caps", caps)
        object.__setattr__(self, "boundaries", bounds)

    def __call__(self, step: int) -> int:
        """The turn cap at training step `step` (>= 0)."""
        return self.caps[bisect.bisect_right(self.boundaries, step)]


@dataclass(frozen=True)
class LinearTurnSchedule:
    """A turn cap that grows by `increment` every `every` training steps, up to `maximum`.

    Cap at step ``s`` is ``min(start + increment * (s // every), maximum)`` (no ceiling when
    `maximum` is `None`): ScalingInter-RL's ``h_{t+1} = h_t + delta_h`` every ``Delta`` steps.

    Raises:
        ValueError: `start`, `every` or `maximum` is not a positive int, `increment` is not a
            non-negative int, or ``maximum < start``.
    """

    start: int
    increment: int
    every: int
    maximum: int | None = None

    def __post_init__(self) -> None:
        _check_positive_int("start", self.start)
        _check_non_negative_int("increment", self.increment)
        _check_positive_int("every", self.every)
        if self.maximum is not None and _check_positive_int("maximum", self.maximum) < self.start:
            raise ValueError(f"maximum ({self.maximum}) must be >= start ({self.start})")

    def __call__(self, step: int) -> int:
        """The turn cap at training step `step` (>= 0)."""
        cap = self.start + self.increment * (step // self.every)
        return cap if self.maximum is None else min(cap, self.maximum)


class HorizonSchedule(_TurnLimit):
    """A turn limit that grows with the training step: the ScalingInter-RL curriculum.

    AgentGym-RL's ScalingInter-RL trains with a small interaction horizon first (exploit,
    learn basic skills) and raises it in phases (explore, plan, backtrack). `schedule` maps
    the training step to the turn cap: a `PiecewiseTurnSchedule`, a `LinearTurnSchedule` or
    any ``Callable[[int], int]`` returning a positive int.

    The trainer calls ``set_training_step(step)``, directly or, in a vector env, through
    ``call("set_training_step", step)``; it reaches this wrapper through the `__getattr__`
    delegation of any wrappers outside it. The new cap takes effect at the next `reset()`:
    an episode keeps the horizon it started with, so the turns of one episode are never
    judged by two different limits. `current_max_turns` is the cap of the current episode.

    Truncation behaves like `MaxTurns`, with ``info["truncated_reason"] = "horizon"``.
    Wrapper state holds the training step, the current episode's cap and its turn counter,
    so `set_state` restores all three.
    """

    _reason = "horizon"

    def __init__(self, env: Env, schedule: Callable[[int], int]) -> None:
        super().__init__(env)
        if not callable(schedule):
            raise TypeError(
                f"schedule must map a training step to a turn cap (e.g. "
                f"PiecewiseTurnSchedule), got {type(schedule).__name__}"
            )
        self.schedule = schedule
        self._training_step = 0
        self._episode_cap = self._cap_at(0)

    def _cap_at(self, step: int) -> int:
        cap = self.schedule(step)
        if not _is_int(cap) or cap < 1:
            raise ValueError(
                f"schedule {self.schedule!r} gave {cap!r} at training step {step}; "
                "it must return a positive int"
            )
        return int(cap)

    def _start_episode(self) -> None:
        self._episode_cap = self._cap_at(self._training_step)

    @property
    def training_step(self) -> int:
        """The last training step passed to `set_training_step` (0 before any)."""
        return self._training_step

    @property
    def current_max_turns(self) -> int:
        """The turn cap of the current episode (``schedule(0)`` before the first reset)."""
        return self._episode_cap

    @property
    def next_max_turns(self) -> int:
        """The turn cap the next episode will get: ``schedule(training_step)``."""
        return self._cap_at(self._training_step)

    def set_training_step(self, step: int) -> None:
        """Set the training step; the cap it gives applies from the next `reset()`.

        Raises:
            ValueError: `step` is not a non-negative int, or the schedule gives no positive
                int cap for it (checked now, so the trainer sees the error, not a worker).
        """
        step = _check_non_negative_int("training step", step)
        self._cap_at(step)
        self._training_step = step

    def get_wrapper_state(self) -> dict[str, int]:
        """``{"training_step", "max_turns" (this episode's cap), "turns"}``."""
        return {
            "training_step": self._training_step,
            "max_turns": self._episode_cap,
            "turns": self._turns,
        }

    def set_wrapper_state(self, state: dict[str, int]) -> None:
        """Restore what `get_wrapper_state` returned."""
        self._training_step = int(state["training_step"])
        self._episode_cap = int(state["max_turns"])
        self._turns = int(state["turns"])
