"""What every vector env shares: the API, autoreset, seeds and sub-env slots.

A vector env runs `num_envs` sub-envs and steps them as one batch. The backends differ
only in *where* sub-envs live and run (calling thread, worker threads, worker processes,
Ray actors); the semantics below are the same for all of them and follow Gymnasium 1.x
exactly. Autoreset is decided and carried out in one place, `VectorEnv.step`; a backend
only runs the steps and resets it is handed (`SubEnv.step`), wherever its sub-envs live.
In ``SAME_STEP`` it is handed each step with "then reset it if the episode ended"
(`VectorEnv._run_steps_and_resets`), so that a worker process answers both in one round trip.

Autoreset (`AutoresetMode`, published in ``metadata["autoreset_mode"]``):

* ``NEXT_STEP`` (default): the step that ends an episode returns its final observation.
  The *next* step of that sub-env ignores its action, resets it, and returns the reset
  observation and info with ``reward=0.0, terminated=False, truncated=False``.
* ``SAME_STEP``: the sub-env is reset inside the step that ended the episode. That step
  returns the reset observation, the final reward and flags, and an info that is the
  reset info plus ``final_obs`` and ``final_info`` (the ending step's observation and info).
* ``DISABLED``: nothing is reset automatically; call
  ``reset(options={"reset_mask": mask})`` with a boolean array of shape ``(num_envs,)``.
  Stepping a sub-env whose episode is over raises `ValueError`.

xpgym extensions:

* Partial stepping: ``step({i: action, ...})`` steps only those sub-envs; every returned
  list/array has one entry per key, in the mapping's order.
* Failure isolation: a sub-env whose `step` raises (or, in the thread, process and Ray backends,
  exceeds ``step_timeout`` seconds) does not stop the batch. Its result is
  ``(last observation, 0.0, terminated=False, truncated=True, {"error": "..."})``; the
  broken env is discarded and rebuilt from its factory at its next reset (its RNG then
  starts from fresh OS entropy). Exceptions in an explicit `reset()` are raised as
  `SubEnvError`. Construction is bounded by ``start_timeout`` (thread, process and Ray
  backends): sub-envs not built within it raise `SubEnvError(index, "construction")`.
* Seeds: ``reset(seed=s)`` seeds sub-env `i` with ``derive_seeds(s, num_envs)[i]``, which
  does not depend on `num_envs` for a given `i`, and never overlaps another `s` the way
  ``s + i`` does. A list of seeds is used as given.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from xpgym.core.env import Env, Wrapper
from xpgym.core.errors import step_failure_info

__all__ = [
    "AutoresetMode",
    "StepBatch",
    "SubEnvError",
    "VectorEnv",
    "derive_seeds",
]

logger = logging.getLogger(__name__)

StepBatch = tuple[list[Any], np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]
"""`(observations, rewards[float64, (k,)], terminated[bool, (k,)], truncated[bool, (k,)],
infos)` for the `k` sub-envs stepped."""

StepResult = tuple[Any, float, bool, bool, dict[str, Any]]
"""`(obs, reward, terminated, truncated, info)` of one sub-env."""

StepTask = tuple[int, str | None]
"""`(index, action)` for one sub-env; action `None` resets it in place of a step."""


class AutoresetMode(enum.Enum):
    """When a finished sub-env is reset; values match Gymnasium's names."""

    NEXT_STEP = "NextStep"
    SAME_STEP = "SameStep"
    DISABLED = "Disabled"

    @classmethod
    def parse(cls, mode: AutoresetMode | str) -> AutoresetMode:
        """Accept the enum, its value (``"NextStep"``) or its name (``"next_step"``)."""
        if isinstance(mode, cls):
            return mode
        if isinstance(mode, str):
            for member in cls:
                if mode in (member.value, member.name) or mode.upper() == member.name:
                    return member
        raise ValueError(
            f"autoreset_mode must be one of {[m.value for m in cls]} (or the AutoresetMode "
            f"enum), got {mode!r}"
        )


class SubEnvError(RuntimeError):
    """A sub-env raised outside of `step` (in `reset`, `call`, ...): carries its index."""

    def __init__(self, index: int, operation: str, detail: str) -> None:
        super().__init__(f"sub-env {index} failed in {operation}: {detail}")
        self.index = index
        self.operation = operation


def derive_seeds(seed: int, num_envs: int) -> list[int]:
    """The per-sub-env seeds `reset(seed=seed)` uses: 63-bit ints from `np.random.SeedSequence`.

    ``derive_seeds(s, n)[:k] == derive_seeds(s, k)``: a sub-env's seed does not depend on how
    many sub-envs there are.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    words = np.random.SeedSequence(int(seed)).generate_state(num_envs, dtype=np.uint64)
    return cast(list[int], (words >> np.uint64(1)).tolist())


def step_ended_episode(action: str | None, result: StepResult) -> bool:
    """Whether a step task's `result` ended its episode, so that ``SAME_STEP`` resets the
    sub-env now: a real step (`action` not `None`, not a reset in place of one) that
    terminated or truncated."""
    return action is not None and bool(result[2] or result[3])


def error_info(exc: BaseException) -> dict[str, Any]:
    """The info of a step that failed with `exc`: ``{"error": "<Type>: <message>", ...}``,
    with the infrastructure-failure marker (`xpgym.core.errors.step_failure_info`)."""
    return step_failure_info(exc)


def _owner_of(env: Env, name: str) -> Any:
    """The innermost object in a wrapper stack that defines attribute `name` (else `env`)."""
    target: Any = env
    while (
        isinstance(target, Wrapper) and name not in vars(target) and not hasattr(type(target), name)
    ):
        target = target.env
    return target if hasattr(target, name) else env


class SubEnv:
    """One sub-env and its last observation, wherever it runs (thread or worker process).

    Executes the operations the vector env decided on; it makes no decisions itself.
    A failed step discards the env; it is rebuilt from `env_fn` by the next operation that
    needs it (the reset that follows, or a `call`, `get_attr` or `set_attr` before it).
    """

    __slots__ = ("env", "env_fn", "last_obs")

    def __init__(self, env_fn: Callable[[], Env], *, build: bool = True) -> None:
        self.env_fn = env_fn
        self.env: Env | None = env_fn() if build else None
        self.last_obs: Any = None

    def live(self) -> Env:
        """The env, built from `env_fn` first if it was discarded (or not built yet)."""
        if self.env is None:
            self.env = self.env_fn()
        return self.env

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict]:
        """Reset (building the env first if it was discarded); raises what `reset` raises."""
        obs, info = self.live().reset(seed=seed, options=options)
        self.last_obs = obs
        return obs, info

    def step(self, action: str | None) -> StepResult:
        """Step with `action`; or, when `action` is `None`, reset in place of a step (an
        autoreset the vector env decided on), returning ``(obs, 0.0, False, False, info)``.

        Never raises: a failure discards the env and returns the truncation `failed` reports.
        """
        try:
            if action is None:
                obs, info = self.reset(None, None)
                return obs, 0.0, False, False, info
            if self.env is None:
                raise RuntimeError("the env was discarded after a failure and needs a reset")
            result = self.env.step(action)  # `Env.step` checked it is a 5-tuple
        except Exception as exc:  # isolation: one broken sub-env must not stop the batch
            return self.failed(exc)
        self.last_obs = result[0]
        return result

    def failed(self, exc: BaseException) -> StepResult:
        """Discard the env after `exc`; return the truncated result that reports it."""
        logger.warning("sub-env %r failed and will be rebuilt: %r", self.env, exc)
        self.discard()
        return self.last_obs, 0.0, False, True, error_info(exc)

    def call(self, name: str, args: tuple, kwargs: dict) -> Any:
        attr = getattr(self.live(), name)
        return attr(*args, **kwargs) if callable(attr) else attr

    def get_attr(self, name: str) -> Any:
        return getattr(self.live(), name)

    def set_attr(self, name: str, value: Any) -> None:
        setattr(_owner_of(self.live(), name), name, value)

    def abandoned(self) -> SubEnv:
        """A replacement for this sub-env while a thread is stuck in its env: same factory
        and last observation, env built at the next reset. The stuck env is left alone (not
        closed: the thread may still be using it)."""
        fresh = SubEnv(self.env_fn, build=False)
        fresh.last_obs = self.last_obs
        return fresh

    def discard(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            try:
                env.close()
            except Exception:
                logger.exception("closing a failed sub-env raised")


class VectorEnv:
    """Base class: the batch API and autoreset; backends implement the `_run_*` hooks.

    Args:
        env_fns: One zero-argument factory per sub-env (``"process"`` needs them picklable).
        autoreset_mode: `AutoresetMode` or its string name/value. Default ``NEXT_STEP``.
        step_timeout: Seconds a sub-env's step may take before it is truncated with
            ``info["error"]`` (thread, process and Ray backends).
        start_timeout: Seconds the sub-envs may take to be built (thread, process and Ray
            backends): at construction, and for a worker or actor that replaces a dead one.
            Past it the constructor (or the step that replaced the host) raises
            `SubEnvError(index, "construction")`; a worker or actor that missed it is
            killed, a thread is abandoned. `None` waits as long as the build takes.

    Attributes:
        num_envs: Number of sub-envs.
        autoreset_mode: The parsed `AutoresetMode`.
        metadata: ``{"autoreset_mode": AutoresetMode}`` plus the first sub-env's metadata.
    """

    supports_step_timeout = True

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        step_timeout: float | None = None,
        start_timeout: float | None = None,
    ) -> None:
        if not env_fns:
            raise ValueError(f"{type(self).__name__} needs at least one env factory")
        if not all(callable(fn) for fn in env_fns):
            raise TypeError("env_fns must be zero-argument callables that build an Env")
        for name, timeout in (("step_timeout", step_timeout), ("start_timeout", start_timeout)):
            if timeout is None:
                continue
            if not self.supports_step_timeout:
                raise ValueError(
                    f"{type(self).__name__} runs sub-envs in the calling thread and cannot "
                    f"time them out ({name}); use vectorization_mode='thread' or 'process'"
                )
            if timeout <= 0:
                raise ValueError(f"{name} must be positive seconds, got {timeout!r}")
        self.env_fns = list(env_fns)
        self.num_envs = len(env_fns)
        self.autoreset_mode = AutoresetMode.parse(autoreset_mode)
        self.step_timeout = step_timeout
        self.start_timeout = start_timeout
        self.metadata: dict[str, Any] = {"autoreset_mode": self.autoreset_mode}
        self.closed = False
        self._observations: list[Any] = [None] * self.num_envs
        # The indices of a step of every sub-env (never mutated): `step` tests identity.
        self._every_index = list(range(self.num_envs))
        # Sub-envs whose last step ended their episode: the next step resets them
        # (NEXT_STEP, and SAME_STEP after a failed reset) or refuses them (DISABLED).
        # Sets, not arrays: `step` tests membership per sub-env, and both are usually empty.
        self._autoreset_envs: set[int] = set()
        self._never_reset: set[int] = set(range(self.num_envs))

    # -- backend hooks -------------------------------------------------------------------
    def _run_resets(
        self, tasks: list[tuple[int, int | None, dict[str, Any] | None]]
    ) -> list[tuple[Any, dict]]:
        """Reset `(index, seed, options)` for each task; raise `SubEnvError` on failure."""
        raise NotImplementedError

    def _run_steps(self, tasks: list[StepTask]) -> list[StepResult]:
        """Run `SubEnv.step(action)` for each `(index, action)` task; one result per task, in
        order. A failure or an overrun ``step_timeout`` is a truncated result, never raised."""
        raise NotImplementedError

    def _run_steps_and_resets(
        self, tasks: list[StepTask]
    ) -> tuple[list[StepResult], dict[int, StepResult]]:
        """SAME_STEP: run the step tasks as `_run_steps` does, then reset (``action`` `None`)
        every sub-env whose step ended its episode. Returns the step results and the reset
        results by task position. Backends whose sub-envs live elsewhere do both in one
        round trip (`xpgym.core.vector.hosted`)."""
        return self._reset_ended(tasks, self._run_steps(tasks), {})

    def _reset_ended(
        self, tasks: list[StepTask], results: list[StepResult], resets: dict[int, StepResult]
    ) -> tuple[list[StepResult], dict[int, StepResult]]:
        """Add to `resets` the reset of each sub-env whose step (not a reset in place of one)
        ended its episode and that `resets` has no reset for; return `(results, resets)`."""
        ended = [
            j
            for j, result in enumerate(results)
            if (result[2] or result[3]) and tasks[j][1] is not None and j not in resets
        ]
        if ended:
            reset_results = self._run_steps([(tasks[j][0], None) for j in ended])
            resets.update(zip(ended, reset_results, strict=True))
        return results, resets

    def _run_calls(self, indices: list[int], method: str, *args: Any) -> list[Any]:
        """Run `SubEnv.<method>(*args)` on each sub-env; raise `SubEnvError` on failure."""
        raise NotImplementedError

    def _close_backend(self) -> None:
        raise NotImplementedError

    # -- public API ----------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset every sub-env (in parallel where the backend allows).

        Args:
            seed: `None` (each sub-env continues its own stream), an int (sub-env `i` gets
                ``derive_seeds(seed, num_envs)[i]``), or a list of ints/`None` per sub-env.
            options: Passed to every sub-env's `reset`. The key ``"reset_mask"`` (a bool
                array of shape ``(num_envs,)``) resets only those sub-envs; the others keep
                their current observation and get an empty info.

        Returns:
            `(observations, infos)`: lists of length `num_envs`.
        """
        self._check_open()
        seeds = self._seed_list(seed)
        options = dict(options) if options is not None else None
        mask = np.ones(self.num_envs, dtype=np.bool_)
        if options is not None and "reset_mask" in options:
            mask = self._validate_reset_mask(options.pop("reset_mask"))
        indices = [i for i in range(self.num_envs) if mask[i]]
        results = self._run_resets([(i, seeds[i], options) for i in indices])
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        for i, (obs, info) in zip(indices, results, strict=True):
            self._observations[i] = obs
            infos[i] = info
        self._autoreset_envs.difference_update(indices)
        self._never_reset.difference_update(indices)
        return list(self._observations), infos

    def step(self, actions: Sequence[str] | Mapping[int, str]) -> StepBatch:
        """Step all sub-envs (a sequence of `num_envs` actions) or some (``{index: action}``).

        Returns:
            `(observations, rewards, terminated, truncated, infos)` with one entry per
            stepped sub-env (in index order for a sequence, in key order for a mapping).
            Rewards are float64, flags bool numpy arrays. See the module docstring for
            autoreset and failure semantics.
        """
        self._check_open()
        indices, action_list = self._index_actions(actions)
        mode = self.autoreset_mode
        finished = self._autoreset_envs
        observations = self._observations

        # Autoreset, for every backend. A sub-env whose last step ended its episode is
        # reset in place of this step (NEXT_STEP), or may not be stepped (DISABLED).
        if finished and mode is AutoresetMode.DISABLED:
            refused = [i for i in indices if i in finished]
            if refused:
                raise ValueError(
                    f"sub-envs {refused} finished their episode and autoreset is disabled; "
                    "call reset(options={'reset_mask': mask}) first"
                )
        tasks: list[StepTask] = (
            [
                (i, None if i in finished else action)  # None: reset instead of step
                for i, action in zip(indices, action_list, strict=True)
            ]
            if finished
            else list(zip(indices, action_list, strict=True))
        )
        # SAME_STEP: a sub-env whose episode this step ended is reset now. The step returns
        # the reset observation, the ending step's reward and flags, and the reset info plus
        # ``final_obs`` and ``final_info`` (the ending step's observation and info).
        if mode is AutoresetMode.SAME_STEP:
            results, resets = self._run_steps_and_resets(tasks)
        else:
            results, resets = self._run_steps(tasks), {}
        if not results:  # an empty mapping steps nothing
            return [], np.zeros(0, np.float64), np.zeros(0, np.bool_), np.zeros(0, np.bool_), []
        if finished:  # a reset in place of a step starts the episode again (unless it failed)
            finished.difference_update([i for i, action in tasks if action is None])
        finished.update([indices[j] for j, result in enumerate(results) if result[2] or result[3]])
        for j, reset in resets.items():
            if reset[3]:  # the reset failed: report it; the next step resets again
                results[j] = reset
                continue
            obs, reward, terminated, truncated, info = results[j]
            same_step_info = {**reset[4], "final_obs": obs, "final_info": info}
            if "error" in info:  # a failed step stays as visible as in the other modes
                same_step_info["error"] = info["error"]
            results[j] = (reset[0], reward, terminated, truncated, same_step_info)
            finished.discard(indices[j])
        obs, rewards, terminations, truncations, infos = zip(*results, strict=True)
        if indices is self._every_index:
            observations[:] = obs
        else:
            for i, observation in zip(indices, obs, strict=True):
                observations[i] = observation
        return (
            list(obs),
            np.array(rewards, dtype=np.float64),
            np.array(terminations, dtype=np.bool_),
            np.array(truncations, dtype=np.bool_),
            list(infos),
        )

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method `name` on every sub-env (or read it, if not callable); one result each.

        Reaches methods of inner envs and wrappers through wrapper delegation, e.g.
        ``vec.call("set_training_step", 100)`` for a `HorizonSchedule` wrapper.
        """
        self._check_open()
        return tuple(self._run_calls(list(range(self.num_envs)), "call", name, args, kwargs))

    def get_states(self, indices: Sequence[int] | None = None) -> list[Any]:
        """``get_state()`` of sub-envs `indices` (all by default), in parallel where the
        backend can: snapshots to start several episodes from one state (GRPO groups)."""
        self._check_open()
        chosen = self._check_indices(range(self.num_envs) if indices is None else indices)
        return self._run_calls(chosen, "call", "get_state", (), {})

    def set_states(
        self, states: Mapping[int, Any], observations: Mapping[int, Any] | None = None
    ) -> None:
        """``set_state(states[i])`` on each sub-env `i`; each is then mid-episode and can be
        stepped, as after `reset` (no autoreset is pending for it).

        Args:
            states: Snapshots from `get_states` (or `Env.get_state`) by sub-env index.
            observations: The observation each restored sub-env now shows, if known; it is
                what a masked `reset` reports for sub-envs it does not reset.
        """
        self._check_open()
        for i in self._check_indices(states):
            self._run_calls([i], "call", "set_state", (states[i],), {})
            self._autoreset_envs.discard(i)
            self._never_reset.discard(i)
            if observations is not None and i in observations:
                self._observations[i] = observations[i]

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Read attribute `name` of every sub-env."""
        self._check_open()
        return tuple(self._run_calls(list(range(self.num_envs)), "get_attr", name))

    def set_attr(self, name: str, values: Any | Sequence[Any]) -> None:
        """Set attribute `name` on every sub-env: one value for all, or a list of `num_envs`.

        The attribute is set on the innermost wrapper layer (or env) that defines it, so a
        wrapper does not shadow the value its inner env reads.
        """
        self._check_open()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr needs {self.num_envs} values, got {len(values)}")
        for i, value in enumerate(values):
            self._run_calls([i], "set_attr", name, value)

    def close(self) -> None:
        """Close every sub-env and stop every worker thread/process. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        self._close_backend()

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            with contextlib.suppress(Exception):  # interpreter shutdown: nothing to do
                self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, {self.autoreset_mode})"

    # -- helpers -------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def _seed_list(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, bool):
            raise TypeError(f"seed must be an int, a sequence of them or None, got {seed!r}")
        if isinstance(seed, (int, np.integer)):
            return list(derive_seeds(int(seed), self.num_envs))
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"got {len(seeds)} seeds for {self.num_envs} sub-envs")
        return seeds

    def _validate_reset_mask(self, mask: Any) -> np.ndarray:
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
            raise TypeError(f"options['reset_mask'] must be a numpy bool array, got {mask!r}")
        if mask.shape != (self.num_envs,):
            raise ValueError(
                f"options['reset_mask'] must have shape ({self.num_envs},), got {mask.shape}"
            )
        if not mask.any():
            raise ValueError("options['reset_mask'] selects no sub-env")
        return mask

    def _check_indices(self, indices: Any) -> list[int]:
        chosen = list(indices)
        bad = [
            i for i in chosen if not isinstance(i, (int, np.integer)) or not 0 <= i < self.num_envs
        ]
        if bad:
            raise IndexError(f"sub-env indices {bad} out of range(0, {self.num_envs})")
        return [int(i) for i in chosen]

    def _index_actions(
        self, actions: Sequence[str] | Mapping[int, str]
    ) -> tuple[list[int], list[str]]:
        if isinstance(actions, Mapping):
            indices = self._check_indices(actions)
            action_list = list(actions.values())
        else:
            if isinstance(actions, str) or len(actions) != self.num_envs:
                raise ValueError(
                    f"step() takes {self.num_envs} actions or a {{index: action}} mapping, "
                    f"got {actions!r:.80}"
                )
            indices, action_list = self._every_index, list(actions)
        if not all(map(isinstance, action_list, itertools.repeat(str))):
            not_str = [
                i for i, a in zip(indices, action_list, strict=True) if not isinstance(a, str)
            ]
            raise TypeError(
                f"actions are the model's text (str); sub-envs {not_str} got "
                f"{[type(action_list[indices.index(i)]).__name__ for i in not_str]}"
            )
        if self._never_reset:
            not_reset = [i for i in indices if i in self._never_reset]
            if not_reset:
                raise RuntimeError(f"sub-envs {not_reset} were never reset; call reset() first")
        return indices, action_list
