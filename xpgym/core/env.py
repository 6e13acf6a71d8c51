"""The `Env` and `Wrapper` contract.

Every xpgym environment is a text environment: observations are strings, actions are the
model's raw text. This module holds the whole contract; a reader should be able to learn
the API from it alone.

Episode lifecycle (enforced for every subclass, see `Env.__init_subclass__`):

* `reset()` must be called before the first `step()`.
* After `step()` returns `terminated or truncated`, the next `step()` raises
  `EpisodeFinishedError` until `reset()` (or `set_state()`) is called. An env that wants to
  accept steps after the end sets the class attribute ``allows_step_after_done = True``
  and documents what such steps do.
* `step()` with an action that is not a `str` raises `TypeError` naming the env.

Randomness comes only from `Env.np_random`, a per-instance `numpy.random.Generator`
seeded by `reset(seed=...)`. The global `random` and `numpy.random` states are never used,
so the same seed gives the same episode in any thread and in any order.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

import numpy as np

if TYPE_CHECKING:
    from types import TracebackType

__all__ = [
    "ENV_ID_PATTERN",
    "STATE_KEY",
    "Env",
    "EnvCore",
    "EnvSpec",
    "EpisodeFinishedError",
    "ResetNeededError",
    "StepResult",
    "Wrapper",
    "make_np_random",
]

ObsType = TypeVar("ObsType")
_EnvT = TypeVar("_EnvT", bound="EnvCore")
StepResult = tuple[Any, float, bool, bool, dict[str, Any]]
"""`(observation, reward, terminated, truncated, info)` as returned by `Env.step`."""

STATE_KEY = "state_key"
"""The info key of an env's state key: a string equal for two envs exactly when the state
the next turn acts on is the same (what the episode's future depends on, not how it got
there). An env whose observation does not determine that state puts it in the info of
`reset` and of every step; GiGPO's anchor states
(`xpgym.core.trajectory.turn_state_keys`) group turns by it, and by the observation
where an env gives none."""

ENV_ID_PATTERN = re.compile(
    r"^(?P<category>[a-z][a-z0-9_]*):(?P<name>[A-Za-z][A-Za-z0-9_.]*)"
    r"-v(?P<version>\d+)(?:-(?P<variant>[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*))?$"
)
"""An env id: ``category:Name-vN[-variant]`` (lowercase category, `N` an integer)."""


@dataclass(frozen=True)
class EnvSpec:
    """How to build one registered env.

    Attributes:
        id: ``category:Name-vN[-variant]``.
        entry_point: ``"module:Attr"`` (imported lazily) or a callable returning an `Env`.
        kwargs: Keyword arguments passed to the entry point (callers' kwargs override them).
        description: One line for listings and the env table (empty if not given).
        requires_download: Making or resetting the env fetches data over the network (a
            Hugging Face hub dataset, say) unless it is already cached. Offline checks
            (golden transcripts, conformance tests) skip such ids.
    """

    id: str
    entry_point: str | Callable[..., Env]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    requires_download: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))

    def __reduce__(self) -> tuple[Any, ...]:  # MappingProxyType does not pickle
        return (
            EnvSpec,
            (
                self.id,
                self.entry_point,
                dict(self.kwargs),
                self.description,
                self.requires_download,
            ),
        )

    @property
    def _parts(self) -> re.Match[str]:
        match = ENV_ID_PATTERN.match(self.id)
        assert match is not None  # validated by register()
        return match

    @property
    def category(self) -> str:
        return self._parts["category"]

    @property
    def name(self) -> str:
        return self._parts["name"]

    @property
    def version(self) -> int:
        return int(self._parts["version"])

    @property
    def variant(self) -> str | None:
        return self._parts["variant"]

    def entry_point_name(self) -> str:
        """The entry point as ``module:Attr`` text."""
        if isinstance(self.entry_point, str):
            return self.entry_point
        return f"{self.entry_point.__module__}:{self.entry_point.__qualname__}"


class ResetNeededError(RuntimeError):
    """Raised when `step()` is called before the first `reset()`."""


class EpisodeFinishedError(RuntimeError):
    """Raised when `step()` is called after the episode terminated or was truncated."""


def make_np_random(seed: int | None = None) -> tuple[np.random.Generator, int]:
    """Return a fresh `numpy.random.Generator` (PCG64) and the integer seed it came from.

    Args:
        seed: A non-negative integer, or `None` to draw the seed from OS entropy.

    Raises:
        ValueError: if `seed` is negative or not an integer.
    """
    if seed is None:
        # OS entropy, not global state; a SeedSequence made without entropy draws an int.
        entropy = cast(int, np.random.SeedSequence().entropy)
        seed = int(entropy % (2**63))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
    seed = int(seed)
    return np.random.Generator(np.random.PCG64(seed)), seed


def _describe(env: EnvCore) -> str:
    spec = getattr(env, "spec", None)
    name = type(env).__name__
    return f"{name}({spec.id!r})" if spec is not None else name


def _refuse_step(env: Env) -> None:
    """Raise why `env` may not step now, or return if it may (a step after the end that the
    env allows). Only called off the hot path, when the episode is not running."""
    if env._xpgym_running is None:
        raise ResetNeededError(f"{_describe(env)}: call reset() before step()")
    if not env.allows_step_after_done:
        raise EpisodeFinishedError(
            f"{_describe(env)}: the episode is over (terminated or truncated); "
            "call reset() to start a new one"
        )


def _enforce_step(step: Callable[..., StepResult]) -> Callable[..., StepResult]:
    @functools.wraps(step)
    def checked_step(self: Env, action: Any) -> StepResult:
        if not isinstance(action, str):
            raise TypeError(
                f"{_describe(self)}.step() takes the model's text as a str, "
                f"got {type(action).__name__}: {action!r:.80}"
            )
        if self._xpgym_running is not True:
            _refuse_step(self)
        result = step(self, action)
        if type(result) is not tuple or len(result) != 5:
            raise TypeError(
                f"{_describe(self)}.step() must return (obs, reward, terminated, truncated, "
                f"info), got {result!r:.120}"
            )
        if result[2] or result[3]:
            self._xpgym_running = False
        return result

    checked_step._xpgym_enforced = True  # type: ignore[attr-defined]  # a function attribute
    return checked_step


def _enforce_reset(reset: Callable[..., tuple[Any, dict]]) -> Callable[..., tuple[Any, dict]]:
    @functools.wraps(reset)
    def checked_reset(
        self: Env, *args: Any, seed: Any = None, options: Any = None, **extra: Any
    ) -> tuple[Any, dict]:
        # `seed` and `options` by name: forwarding them through ``**kwargs`` builds and
        # unpacks a dict per call, at every level of a `super().reset` chain (up to 0.25 us
        # each; GuessTheNumber's reset 2.75 -> 2.24 us).
        if args or extra:
            result = reset(self, *args, seed=seed, options=options, **extra)
        else:
            result = reset(self, seed=seed, options=options)
        self._xpgym_running = True
        return result

    checked_reset._xpgym_enforced = True  # type: ignore[attr-defined]  # a function attribute
    return checked_reset


def _enforce_set_state(set_state: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(set_state)
    def checked_set_state(self: Env, state: Any) -> None:
        set_state(self, state)
        self._xpgym_running = True

    checked_set_state._xpgym_enforced = True  # type: ignore[attr-defined]  # a function attribute
    return checked_set_state


_Enforcer = Callable[[Callable[..., Any]], Callable[..., Any]]
_ENFORCERS: dict[str, _Enforcer] = {
    "step": _enforce_step,
    "reset": _enforce_reset,
    "set_state": _enforce_set_state,
}


class EnvCore:
    """What every environment shares, single- or multi-agent.

    A per-instance random generator (`np_random`, seeded by ``reset(seed=...)``), the
    `metadata` and `spec` attributes, an idempotent `close()`, and context-manager support.
    `Env` (one agent, ``step(str)``) and `xpgym.core.multiagent.MultiAgentEnv` (dicts keyed
    by agent id) build on it.

    Attributes:
        metadata: Free-form facts about the env (class attribute).
        spec: The `EnvSpec` the env was made from by `xpgym.make`, else `None`.
    """

    metadata: ClassVar[dict[str, Any]] = {}
    spec: EnvSpec | None = None

    _np_random: np.random.Generator | None = None
    _np_random_seed: int | None = None

    def _reseed(self, seed: int | None) -> None:
        """Reseed `np_random` from `seed`; `None` keeps the current stream."""
        if seed is not None:
            self._np_random, self._np_random_seed = make_np_random(seed)

    @property
    def np_random(self) -> np.random.Generator:
        """The env's own random generator; seeded from OS entropy if `reset` got no seed."""
        if self._np_random is None:
            self._np_random, self._np_random_seed = make_np_random()
        return self._np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self._np_random = value
        self._np_random_seed = -1

    @property
    def np_random_seed(self) -> int | None:
        """The seed `np_random` was made from; `-1` if a generator was assigned directly."""
        return self._np_random_seed

    def close(self) -> None:
        """Release resources (processes, files, connections). Safe to call more than once."""

    def __enter__(self: _EnvT) -> _EnvT:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __str__(self) -> str:
        return f"<{_describe(self)}>"

    __repr__ = __str__


class Env(EnvCore, Generic[ObsType]):
    """A text environment.

    Subclasses implement `reset`, `step`, `sample_random_action`, `get_state` and
    `set_state`, and may override `close`. A subclass's `reset` must call
    ``super().reset(seed=seed)`` first so that `np_random` is reseeded when a seed is given.

    Class attributes:
        allows_step_after_done: If `True`, `step()` after the end of an episode is allowed
            and the env documents what it does. Default `False`: it raises
            `EpisodeFinishedError`.
    """

    allows_step_after_done: ClassVar[bool] = False

    # Lifecycle state kept by the checks: `None` before the first reset, `True` while an
    # episode runs, `False` once it ended. One attribute, so a step reads it once.
    _xpgym_running: bool | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Wrap the subclass's own `step`, `reset` and `set_state` with the lifecycle checks.

        Only methods defined in the subclass body are wrapped, once; inherited ones already
        are. The check costs one function call per step.
        """
        super().__init_subclass__(**kwargs)
        for name, enforce in _ENFORCERS.items():
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, "_xpgym_enforced", False):
                setattr(cls, name, enforce(method))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Start a new episode.

        Args:
            seed: If given, reseeds `np_random` so that the episode is a function of the seed
                (and `options`) alone. If `None`, the generator continues its stream.
            options: Env-specific reset options (e.g. a dataset index).

        Returns:
            `(observation, info)`: the first observation (a `str` for text envs) and a dict.
        """
        self._reseed(seed)
        # The base has no observation to give; every subclass returns its own.
        return None, {}  # type: ignore[return-value]

    def step(self, action: str) -> tuple[ObsType, float, bool, bool, dict[str, Any]]:
        """Apply the model's text `action`.

        Returns:
            `(observation, reward, terminated, truncated, info)`:

            * `reward` is a float for this turn (dense rewards are per turn).
            * `terminated`: the task ended (solved, failed, answered).
            * `truncated`: a limit ended it (turns, tool calls, context). Never both for the
              same reason; a single-turn env returns `terminated=True, truncated=False`.
            * `info` keys with fixed meaning: `correct` (bool), `invalid_action` (bool),
              `parsed_action`, `tool_calls`, `metrics` (dict of floats),
              `available_actions` (list of str, from envs that implement
              `available_actions`, on `reset` and every step), `state_key` (str, from
              envs whose observation does not determine their state, on `reset` and
              every step: `STATE_KEY`).

        Raises:
            TypeError: `action` is not a `str`.
            ResetNeededError: `reset()` was never called.
            EpisodeFinishedError: the episode already ended (see `allows_step_after_done`).
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    def available_actions(self) -> list[str] | None:
        """The actions admissible in the current state, or `None` if this env cannot list them.

        An env that can list them (text worlds, board games) overrides this and returns the
        exact texts its `step` accepts, in a stable order, each one a valid action now; it
        also puts the same list in ``info["available_actions"]`` on `reset` and on every
        step that does not end the episode. Wrappers forward the call to the env they wrap.
        Default: `None`.
        """
        return None

    def sample_random_action(self) -> str:
        """Return a random, well-formed action drawn from `np_random` (for tests and fuzzing)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement sample_random_action()"
        )

    def get_state(self) -> dict[str, Any]:
        """Return a snapshot of the whole episode state, including the RNG state.

        The snapshot is picklable and independent of the env: stepping the env afterwards
        never changes it, so one snapshot can seed many episodes (GRPO groups).
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement get_state()")

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a snapshot from `get_state()`; the env then continues that episode.

        After `set_state`, the same actions give the same observations and rewards as they
        did after the snapshot was taken. The env counts as mid-episode afterwards: restore
        snapshots taken before the episode ended.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement set_state()")

    def can_fork(self) -> bool:
        """Whether an episode of this env can be forked: continued several ways from a
        `get_state` snapshot taken at any turn (`xpgym.rollout.collector.RolloutCollector.fork`).

        Forking needs the whole episode state in the snapshot: ``set_state`` of a snapshot,
        any number of times and on any env of the same spec, must continue the episode
        exactly as it went on after the snapshot was taken. An env whose state lives
        outside the process and is not in its snapshot (a sandbox session, a remote env, an
        MCP server's per-session data) returns `False`; wrappers answer for their own state
        and the env they wrap. Default: whether the class implements `get_state`.
        """
        return type(self).get_state is not Env.get_state

    @property
    def unwrapped(self) -> Env:
        """The innermost env, below every wrapper."""
        return self


class Wrapper(Env[ObsType]):
    """Base class for wrappers: forwards every call to the wrapped env.

    Attributes the wrapper does not define are looked up on the wrapped env at call time
    (`__getattr__`), never copied, so they are always current. A wrapper with state of its
    own overrides `get_wrapper_state` / `set_wrapper_state`; `get_state()` then returns
    ``{"wrapper": <its state>, "env": <inner env's state>}``.
    """

    def __init__(self, env: Env) -> None:
        if not isinstance(env, Env):
            raise TypeError(f"{type(self).__name__} wraps an xpgym Env, got {type(env).__name__}")
        self.env = env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "env":  # private names are never delegated
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r} (private attributes "
                "are not looked up on the wrapped env)"
            )
        return getattr(self.env, name)

    # `spec` and `metadata` are class attributes on Env, so __getattr__ would not reach them.
    # A read-only property over a writable class attribute is an [override] to mypy; here it
    # is the point: the wrapper reports its inner env's value.
    @property
    def spec(self) -> EnvSpec | None:
        return self.env.spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        self.env.spec = value

    @property
    def metadata(self) -> dict[str, Any]:  # type: ignore[override]  # see above
        return self.env.metadata

    @property
    def allows_step_after_done(self) -> bool:  # type: ignore[override]  # see above
        return self.env.allows_step_after_done

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        return self.env.reset(seed=seed, options=options)

    def step(self, action: str) -> tuple[ObsType, float, bool, bool, dict[str, Any]]:
        return self.env.step(action)

    def sample_random_action(self) -> str:
        return self.env.sample_random_action()

    def available_actions(self) -> list[str] | None:
        return self.env.available_actions()

    def get_wrapper_state(self) -> Any:
        """This wrapper's own state (picklable, independent copy). Default: `None`."""
        return None

    def set_wrapper_state(self, state: Any) -> None:
        """Restore what `get_wrapper_state` returned. Default: nothing to restore."""

    def get_state(self) -> dict[str, Any]:
        return {"wrapper": self.get_wrapper_state(), "env": self.env.get_state()}

    def can_fork(self) -> bool:
        """The wrapped env's answer (a wrapper's own state is in its `get_wrapper_state`)."""
        return self.env.can_fork()

    def set_state(self, state: dict[str, Any]) -> None:
        self.env.set_state(state["env"])
        self.set_wrapper_state(state["wrapper"])

    def close(self) -> None:
        self.env.close()

    @property
    def np_random(self) -> np.random.Generator:
        return self.env.np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self.env.np_random = value

    @property
    def np_random_seed(self) -> int | None:
        return self.env.np_random_seed

    @property
    def unwrapped(self) -> Env:
        return self.env.unwrapped

    def __str__(self) -> str:
        return f"<{type(self).__name__}{self.env}>"

    __repr__ = __str__
