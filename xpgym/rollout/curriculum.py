"""Difficulty curricula and zero-variance group filtering, for any trainer's rollout loop.

Three parts, each usable alone:

* **The difficulty interface.** A `DifficultyLadder` orders one env family's settings from
  easiest (level 0) to hardest: `PresetLadder` over the registered presets
  (``<id>-easy``, ``<id>``, ``<id>-hard``), `KnobLadder` over one numeric constructor
  argument of the families that have one (`CONTINUOUS_KNOBS`). `ladder_for` picks one from
  an env id. `DifficultyEnv` wraps an env of a ladder and rebuilds it at the next `reset`
  when its level changes; every ``info`` it returns carries
  ``info["curriculum"] = {"family": ..., "level": ...}`` (the level the episode started at),
  and every step's ``info["metrics"]`` ``curriculum/<family>/level``: the level reaches every
  trainer's log with the episodes' metrics (`xpgym.core.trajectory.episode_metrics`).

* **Schedulers** (the `Scheduler` protocol): called by the trainer's loop once per training
  step, ``apply(vec_env, step)`` before collecting and ``observe(episodes)`` after, and
  ``metrics()`` for the step's log. `SuccessRateScheduler` keeps each family's success rate
  near a target by moving its level; `HorizonScheduler` drives the ScalingInter-RL turn
  schedule (`xpgym.core.wrappers.limits.HorizonSchedule`) the same way.

* **Dynamic sampling** (DAPO, arXiv 2503.14476, section 3.2): `fill_groups` keeps only the
  groups whose members' returns differ (a group of equal returns has zero advantage under
  every group-normalised estimator, so it costs compute and teaches nothing) and draws more
  groups, a bounded number of times, until the requested count is reached or the draws run
  out (the shortfall is reported, never hidden).

Update rule of `SuccessRateScheduler`, per family, with target ``p*``, tolerance ``d`` and
window ``W``: the successes of the episodes that started at the family's current level ``L``
fill a sliding window of the last ``W``. After each `observe`, once the window holds ``W``
results, its mean ``p`` decides: ``p > p* + d`` and ``L < max_level`` gives ``L + 1``;
``p < p* - d`` and ``L > min_level`` gives ``L - 1``; otherwise ``L`` stays (the window keeps
sliding). A move empties the window, so the next move needs ``W`` fresh results at the new
level (hysteresis: the dead band ``[p* - d, p* + d]`` and the refill). Results of episodes
started at another level (collected before a move) are not counted. There is no randomness:
the same results in the same order give the same levels.
"""

from __future__ import annotations

import functools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from xpgym.core.env import Env, EnvSpec, Wrapper
from xpgym.core.registry import UnknownEnvError, make, spec
from xpgym.core.trajectory import Episode
from xpgym.core.vector import VectorEnv, vector_env_class

__all__ = [
    "CONTINUOUS_KNOBS",
    "DifficultyEnv",
    "DifficultyLadder",
    "GroupFill",
    "HorizonScheduler",
    "Knob",
    "KnobLadder",
    "PresetLadder",
    "Scheduler",
    "SuccessRateScheduler",
    "episode_succeeded",
    "family_of",
    "fill_groups",
    "ladder_among",
    "ladder_for",
    "make_curriculum_vec",
    "zero_variance",
    "zero_variance_scores",
]

logger = logging.getLogger(__name__)

INFO_KEY = "curriculum"
"""The info key `DifficultyEnv` adds: ``{"family": str, "level": int}``."""

_PRESET_SUFFIXES = ("-easy", "-hard", "-random")


# --------------------------------------------------------------------------------------
# The difficulty interface
# --------------------------------------------------------------------------------------


class DifficultyLadder(Protocol):
    """One env family's difficulty, as levels ``0`` (easiest) to ``num_levels - 1``.

    Contract: `env_args` returns a registered id and keyword arguments for `xpgym.make`;
    a higher level is never easier than a lower one (by the family's own settings).
    """

    @property
    def family(self) -> str:
        """The family's base id (e.g. ``"game:TowerOfHanoi-v0"``): the scheduler's key."""
        ...

    @property
    def num_levels(self) -> int:
        """How many levels (at least 2)."""
        ...

    def env_args(self, level: int) -> tuple[str, dict[str, Any]]:
        """``(env id, make kwargs)`` of `level` (``0 <= level < num_levels``)."""
        ...


def _check_level(ladder: DifficultyLadder, level: int) -> int:
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)):
        raise TypeError(f"a difficulty level is an int, got {level!r}")
    if not 0 <= level < ladder.num_levels:
        raise ValueError(
            f"level {level} is outside {ladder.family}'s levels 0..{ladder.num_levels - 1}"
        )
    return int(level)


@dataclass(frozen=True)
class PresetLadder:
    """The registered presets of a family: ``<family>-easy``, ``<family>``, ``<family>-hard``.

    Raises:
        ValueError: `family` has no ``-easy`` and ``-hard`` ids.
    """

    family: str

    def __post_init__(self) -> None:
        for suffix in ("-easy", "-hard"):
            try:
                spec(self.family + suffix)
            except UnknownEnvError:
                raise ValueError(
                    f"{self.family!r} has no difficulty presets ({self.family}{suffix} is not "
                    "registered); pass the base id of a family registered with register_presets"
                ) from None

    @property
    def num_levels(self) -> int:
        """Three: easy, default, hard."""
        return 3

    def env_args(self, level: int) -> tuple[str, dict[str, Any]]:
        """``(<family>-easy | <family> | <family>-hard, {})``."""
        suffix = ("-easy", "", "-hard")[_check_level(self, level)]
        return self.family + suffix, {}


class Knob(NamedTuple):
    """A numeric constructor argument that sets a family's difficulty: ``argument`` runs from
    `low` (easiest) to `high` in steps of `stride`; `fixed` are kwargs given at every level
    (what keeps every level solvable, e.g. enough turns)."""

    argument: str
    low: int
    high: int
    stride: int = 1
    fixed: Mapping[str, Any] = {}


CONTINUOUS_KNOBS: Mapping[str, Knob] = {
    # Scrambled by n random moves, so the optimum is <= n <= 60 = the default's turn cap.
    "game:FifteenPuzzle-v0": Knob("scramble_moves", 1, 60),
    # A hidden integer in 1..n: 7 guesses solve n <= 127 by bisection.
    "game:GuessTheNumber-v0": Knob("max_number", 2, 100, fixed={"max_turns": 7}),
    # n mines on the default 6x6 board (36 turns reveal every cell).
    "game:Minesweeper-v0": Knob("mines", 1, 12),
}
"""The families with a numeric difficulty knob, by base id (`KnobLadder`)."""


@dataclass(frozen=True)
class KnobLadder:
    """One level per value of a `Knob`: level ``i`` is ``argument = low + i * stride``.

    Raises:
        ValueError: the knob has fewer than two values or a non-positive stride.
    """

    family: str
    knob: Knob

    def __post_init__(self) -> None:
        if self.knob.stride < 1 or self.knob.high - self.knob.low < self.knob.stride:
            raise ValueError(f"{self.family}: a knob needs two values or more, got {self.knob}")

    @property
    def num_levels(self) -> int:
        """``(high - low) // stride + 1``."""
        return (self.knob.high - self.knob.low) // self.knob.stride + 1

    def env_args(self, level: int) -> tuple[str, dict[str, Any]]:
        """``(family, {argument: low + level * stride, **fixed})``."""
        value = self.knob.low + _check_level(self, level) * self.knob.stride
        return self.family, {**self.knob.fixed, self.knob.argument: value}


def family_of(env_id: str) -> str:
    """`env_id` without a ``-easy``/``-hard``/``-random`` suffix: its family's base id."""
    return next((env_id[: -len(s)] for s in _PRESET_SUFFIXES if env_id.endswith(s)), env_id)


def ladder_for(env_id: str, *, continuous: bool = False) -> DifficultyLadder:
    """The ladder of `env_id`'s family (a ``-easy``/``-hard``/``-random`` suffix is dropped).

    Args:
        env_id: Any id of the family, e.g. ``"game:Sokoban-v0-easy"``.
        continuous: Use the family's `CONTINUOUS_KNOBS` entry instead of its presets.

    Raises:
        ValueError: no presets, or ``continuous=True`` and no knob (the message lists the
            families that have one).
    """
    family = family_of(env_id)
    if not continuous:
        return PresetLadder(family)
    if family not in CONTINUOUS_KNOBS:
        raise ValueError(
            f"{family!r} has no numeric difficulty knob; families with one: "
            f"{sorted(CONTINUOUS_KNOBS)} (or use its presets: continuous=False)"
        )
    return KnobLadder(family, CONTINUOUS_KNOBS[family])


def ladder_among(ladders: Sequence[DifficultyLadder], env_id: str) -> DifficultyLadder:
    """The ladder of `env_id`'s family (`family_of`) among `ladders`.

    Raises:
        ValueError: none of them is of that family, naming the families they are.
    """
    family = family_of(env_id)
    ladder = next((lad for lad in ladders if lad.family == family), None)
    if ladder is None:
        raise ValueError(
            f"{env_id!r} is of family {family!r}, which this scheduler does not hold; "
            f"it holds {sorted(lad.family for lad in ladders)}"
        )
    return ladder


class DifficultyEnv(Wrapper[Any]):
    """An env of a `DifficultyLadder` whose level can change between episodes.

    `set_difficulty_level` (or `set_difficulty_levels`, the form a vector env's ``call``
    uses for mixed families) takes effect at the next `reset`: the inner env is rebuilt
    from ``ladder.env_args(level)`` then (the old one closed), so an episode keeps the
    level it started with. Every ``info`` from `reset` and `step` gets
    ``info["curriculum"] = {"family": ladder.family, "level": the episode's level}``, and
    a step's ``info["metrics"]`` (the inner env's, if any) ``curriculum/<family>/level``.
    `spec` is the family's base spec whatever the level (records name the family; the level
    is in the info). Wrapper state is ``{"level": the episode's level}``; `set_state`
    rebuilds the inner env at that level before restoring it.
    """

    def __init__(self, ladder: DifficultyLadder, level: int = 0) -> None:
        self.ladder = ladder
        self._level = _check_level(ladder, level)
        self._next_level = self._level
        super().__init__(self._build(self._level))

    def _build(self, level: int) -> Env:
        env_id, kwargs = self.ladder.env_args(level)
        env = make(env_id, **kwargs)
        if not isinstance(env, Env):
            raise TypeError(f"{env_id} is not a single-agent Env; a curriculum needs one")
        return env

    def _switch(self, level: int) -> None:
        if level != self._level:
            old, self.env = self.env, self._build(level)
            old.close()
            logger.debug("%s: level %d -> %d", self.ladder.family, self._level, level)
            self._level = level

    @property
    def spec(self) -> EnvSpec | None:
        """The family's registered spec."""
        return spec(self.ladder.family)

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        raise AttributeError("DifficultyEnv.spec is the family's spec and cannot be set")

    @property
    def difficulty_level(self) -> int:
        """The current episode's level."""
        return self._level

    def set_difficulty_level(self, level: int) -> None:
        """Use `level` from the next `reset` on (checked now)."""
        self._next_level = _check_level(self.ladder, level)

    def set_difficulty_levels(self, levels: Mapping[str, int]) -> None:
        """`set_difficulty_level` with ``levels[family]``; other families' entries (and a
        missing entry) leave this env as it is."""
        if self.ladder.family in levels:
            self.set_difficulty_level(levels[self.ladder.family])

    def _tag(self, info: dict[str, Any]) -> dict[str, Any]:
        return {**info, INFO_KEY: {"family": self.ladder.family, "level": self._level}}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        self._switch(self._next_level)
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self._tag(info)

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        tagged = self._tag(info)
        level = {f"{INFO_KEY}/{self.ladder.family}/level": float(self._level)}
        tagged["metrics"] = {**(info.get("metrics") or {}), **level}
        return obs, reward, terminated, truncated, tagged

    def get_wrapper_state(self) -> dict[str, int]:
        """``{"level": the current episode's level}``."""
        return {"level": self._level}

    def set_state(self, state: dict[str, Any]) -> None:
        """Rebuild the inner env at the snapshot's level, then restore it."""
        self._switch(_check_level(self.ladder, state["wrapper"]["level"]))
        self.env.set_state(state["env"])


def _make_difficulty_env(
    ladder: DifficultyLadder, level: int, wrappers: tuple[Callable[[Env], Env], ...]
) -> Env:
    env: Env = DifficultyEnv(ladder, level)
    for wrap in wrappers:
        env = wrap(env)
    return env


def make_curriculum_vec(
    ladders: Sequence[DifficultyLadder],
    envs_per_family: int,
    *,
    level: int = 0,
    vectorization_mode: str = "sync",
    wrappers: Sequence[Callable[[Env], Env]] = (),
    vector_kwargs: Mapping[str, Any] | None = None,
) -> VectorEnv:
    """A vector env of `envs_per_family` `DifficultyEnv` sub-envs per ladder (family after
    family), each starting at `level` and then wrapped by `wrappers` in order (e.g. a
    `HorizonSchedule`); `vectorization_mode` and `vector_kwargs` as in `xpgym.make_vec`.

    Raises:
        ValueError: no ladder or ``envs_per_family < 1``.
    """
    if not ladders or envs_per_family < 1:
        raise ValueError(
            f"need at least one ladder and envs_per_family >= 1, got {len(ladders)} ladders "
            f"and envs_per_family={envs_per_family}"
        )
    env_fns = [
        functools.partial(_make_difficulty_env, ladder, level, tuple(wrappers))
        for ladder in ladders
        for _ in range(envs_per_family)
    ]
    return vector_env_class(vectorization_mode)(env_fns, **dict(vector_kwargs or {}))


# --------------------------------------------------------------------------------------
# Schedulers
# --------------------------------------------------------------------------------------


class Scheduler(Protocol):
    """What a trainer's loop calls once per training step.

    Contract: ``apply(vec_env, step)`` before the step's collection (it sets what the next
    resets use, through ``vec_env.call``), ``observe(episodes)`` with the step's episodes
    after it, ``metrics()`` for the step's log (flat ``name -> float``, names prefixed by
    the scheduler's kind). None of them draws random numbers.
    """

    def apply(self, vec_env: VectorEnv, step: int) -> None:
        """Push this scheduler's current setting to every sub-env for the next resets."""
        ...

    def observe(self, episodes: Sequence[Episode]) -> None:
        """Take a step's finished episodes into account."""
        ...

    def metrics(self) -> dict[str, float]:
        """The state to log now."""
        ...


def episode_succeeded(episode: Episode) -> bool:
    """Whether the episode's last turn reported ``info["correct"]`` true (the envs' success
    flag); an episode without turns did not succeed."""
    return bool(episode.turns) and bool(episode.turns[-1].info.get("correct"))


@dataclass
class _FamilyState:
    level: int
    window: deque[bool]


@dataclass
class SuccessRateScheduler:
    """Moves each family's level to keep its success rate near `target` (the module
    docstring states the rule).

    Args:
        ladders: The families to schedule (their envs wrapped in `DifficultyEnv`).
        target: Success rate ``p*`` to hold, in ``(0, 1)``.
        tolerance: Half-width ``d`` of the dead band, ``0 <= d < min(p*, 1 - p*)``.
        window: Results ``W`` a decision needs (>= 1).
        start_level: Every family's first level (clipped to its bounds).
        min_level, max_level: Bounds for every family (``max_level=None``: the ladder's top).
        success: What counts as a success (default `episode_succeeded`).

    Episodes without ``info["curriculum"]`` on their last turn, of an unknown family, or
    ended by an infrastructure failure are not counted.

    Raises:
        ValueError: an argument outside the ranges above, or two ladders of one family.
    """

    ladders: Sequence[DifficultyLadder]
    target: float = 0.5
    tolerance: float = 0.1
    window: int = 32
    start_level: int = 0
    min_level: int = 0
    max_level: int | None = None
    success: Callable[[Episode], bool] = episode_succeeded
    _families: dict[str, _FamilyState] = field(init=False, repr=False)
    _bounds: dict[str, tuple[int, int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.target < 1.0:
            raise ValueError(f"target must be in (0, 1), got {self.target}")
        if not 0.0 <= self.tolerance < min(self.target, 1.0 - self.target):
            raise ValueError(
                f"tolerance must be in [0, {min(self.target, 1 - self.target)}) for target "
                f"{self.target} (the band must stay inside (0, 1)), got {self.tolerance}"
            )
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"window must be a positive int, got {self.window!r}")
        self._families, self._bounds = {}, {}
        for ladder in self.ladders:
            if ladder.family in self._families:
                raise ValueError(f"two ladders for family {ladder.family!r}")
            top = ladder.num_levels - 1 if self.max_level is None else self.max_level
            low, high = max(self.min_level, 0), min(top, ladder.num_levels - 1)
            if low > high:
                raise ValueError(
                    f"{ladder.family}: min_level {self.min_level} > max_level {high} "
                    f"(levels 0..{ladder.num_levels - 1})"
                )
            self._bounds[ladder.family] = (low, high)
            level = min(max(self.start_level, low), high)
            self._families[ladder.family] = _FamilyState(level, deque(maxlen=self.window))

    @property
    def levels(self) -> dict[str, int]:
        """Each family's current level."""
        return {family: state.level for family, state in self._families.items()}

    def ladder(self, env_id: str) -> DifficultyLadder:
        """The ladder of `env_id`'s family (`family_of`).

        Raises:
            ValueError: the family is not one of this scheduler's, naming those that are.
        """
        return ladder_among(self.ladders, env_id)

    def make_env(self, env_id: str) -> DifficultyEnv:
        """A `DifficultyEnv` of `env_id`'s family at its current level (`ladder`)."""
        ladder = self.ladder(env_id)
        return DifficultyEnv(ladder, self._families[ladder.family].level)

    def apply(self, vec_env: VectorEnv, step: int) -> None:
        """``vec_env.call("set_difficulty_levels", levels)``: every `DifficultyEnv` takes its
        family's level at its next reset (`step` is not used)."""
        vec_env.call("set_difficulty_levels", self.levels)

    def observe(self, episodes: Sequence[Episode]) -> None:
        """Add the results at each family's current level; then move levels by the rule."""
        for episode in episodes:
            tag = episode.turns[-1].info.get(INFO_KEY) if episode.turns else None
            if isinstance(tag, Mapping) and episode.infra_error is None:
                self._add(tag.get("family"), tag.get("level"), self.success(episode))
        self._decide()

    def record(self, family: str, level: int, success: bool) -> None:
        """One episode's result, as `observe` takes it from an episode: counted when `family`
        is scheduled here and `level` is its current level; then move levels by the rule.
        For hooks that see an episode's end but not an `Episode` (a GEM env's last step)."""
        self._add(family, level, bool(success))
        self._decide()

    def state_dict(self) -> dict[str, dict[str, Any]]:
        """``{family: {"level": int, "window": [bool, ...]}}`` (oldest result first): all a
        scheduler's changing state, JSON-compatible; `load_state_dict` restores it."""
        return {
            family: {"level": state.level, "window": list(state.window)}
            for family, state in self._families.items()
        }

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Restore `state_dict`'s output.

        Raises:
            ValueError: its families are not this scheduler's, a level is outside a family's
                bounds, or a window is longer than `window`.
        """
        if set(state) != set(self._families):
            raise ValueError(
                f"the state's families {sorted(state)} are not this scheduler's "
                f"{sorted(self._families)}"
            )
        loaded = {}
        for family, entry in state.items():
            level, window = entry["level"], list(entry["window"])
            low, high = self._bounds[family]
            if isinstance(level, bool) or not isinstance(level, int) or not low <= level <= high:
                raise ValueError(f"{family}: level {level!r} is outside [{low}, {high}]")
            if len(window) > self.window or not all(isinstance(x, bool) for x in window):
                raise ValueError(
                    f"{family}: a window holds at most {self.window} bools, got {window!r:.80}"
                )
            loaded[family] = _FamilyState(level, deque(window, maxlen=self.window))
        self._families = loaded

    def _add(self, family: Any, level: Any, success: bool) -> None:
        state = self._families.get(family) if isinstance(family, str) else None
        if state is not None and level == state.level:
            state.window.append(success)

    def _decide(self) -> None:
        for family, state in self._families.items():
            if len(state.window) < self.window:
                continue
            rate = sum(state.window) / len(state.window)
            low, high = self._bounds[family]
            if rate > self.target + self.tolerance and state.level < high:
                moved = state.level + 1
            elif rate < self.target - self.tolerance and state.level > low:
                moved = state.level - 1
            else:
                continue
            logger.info(
                "curriculum %s: success %.3f over %d episodes, level %d -> %d",
                family,
                rate,
                len(state.window),
                state.level,
                moved,
            )
            state.level = moved
            state.window.clear()

    def metrics(self) -> dict[str, float]:
        """``curriculum/<family>/level`` and ``/window`` (results held), and ``/success`` (the
        window's mean) when the window holds any."""
        out: dict[str, float] = {}
        for family, state in self._families.items():
            out[f"curriculum/{family}/level"] = float(state.level)
            out[f"curriculum/{family}/window"] = float(len(state.window))
            if state.window:
                out[f"curriculum/{family}/success"] = sum(state.window) / len(state.window)
        return out


@dataclass
class HorizonScheduler:
    """The ScalingInter-RL turn schedule as a `Scheduler`: ``apply(vec_env, step)`` is
    ``vec_env.call("set_training_step", step)`` on envs wrapped in
    `xpgym.core.wrappers.limits.HorizonSchedule` over the same `schedule`, whose cap for
    `step` applies from each env's next reset (the wrapper's behaviour, unchanged).
    Episodes do not move it.

    Args:
        schedule: Training step -> turn cap (e.g. `PiecewiseTurnSchedule`).
    """

    schedule: Callable[[int], int]
    _step: int = field(default=0, init=False, repr=False)

    def apply(self, vec_env: VectorEnv, step: int) -> None:
        """Set the training step on every sub-env (the wrapper checks it)."""
        vec_env.call("set_training_step", step)
        self._step = step

    def observe(self, episodes: Sequence[Episode]) -> None:
        """Nothing: the horizon follows the training step only."""

    def metrics(self) -> dict[str, float]:
        """``horizon/max_turns``: the cap of the episodes started since the last `apply`."""
        return {"horizon/max_turns": float(self.schedule(self._step))}


# --------------------------------------------------------------------------------------
# Dynamic sampling: zero-variance group filtering
# --------------------------------------------------------------------------------------


def zero_variance(group: Sequence[Episode]) -> bool:
    """Whether the group's ok episodes all have the same `total_reward` (exact equality),
    or fewer than two ok episodes (no comparison, no advantage): `zero_variance_scores` of
    their returns, an infra-error episode's as None."""
    return zero_variance_scores(
        [None if episode.infra_error is not None else episode.total_reward for episode in group]
    )


def zero_variance_scores(scores: Sequence[float | None]) -> bool:
    """The zero-variance rule on a group's scores (None: a member not counted, e.g. an
    infrastructure failure): fewer than two counted, or all counted exactly equal. The one
    rule behind `fill_groups` and the trainers' group filters built on it (ROLL's
    ``group_filter_cls``, `xpgym.adapters.roll.ZeroVarianceGroupFilter`)."""
    counted = [score for score in scores if score is not None]
    return len(counted) < 2 or len(set(counted)) == 1


@dataclass(frozen=True)
class GroupFill:
    """What `fill_groups` returns.

    Attributes:
        episodes: The kept groups' episodes, group after group, in the order drawn.
        groups: Groups kept (``<= num_groups``).
        drawn: Groups drawn in all (the first draw included).
        dropped: Groups dropped for zero variance.
        extra_draws: Draws after the first.
        shortfall: ``num_groups - groups`` (0 when filled).
    """

    episodes: list[Episode]
    groups: int
    drawn: int
    dropped: int
    extra_draws: int
    shortfall: int

    def metrics(self) -> dict[str, float]:
        """``filter/<field>`` for every count."""
        return {
            f"filter/{name}": float(getattr(self, name))
            for name in ("groups", "drawn", "dropped", "extra_draws", "shortfall")
        }


def _split_groups(episodes: Iterable[Episode]) -> list[list[Episode]]:
    groups: dict[str | None, list[Episode]] = {}
    for episode in episodes:
        if episode.group_id is None:
            raise ValueError("fill_groups needs episodes with a group_id (collect with groups)")
        groups.setdefault(episode.group_id, []).append(episode)
    return list(groups.values())


def fill_groups(
    draw: Callable[[int, int], Sequence[Episode]], num_groups: int, *, max_extra_draws: int
) -> GroupFill:
    """Draw groups, drop the zero-variance ones (`zero_variance`), and draw again until
    `num_groups` are kept or `max_extra_draws` more draws are spent (DAPO's dynamic sampling).

    Args:
        draw: ``draw(groups wanted, draw index)`` -> the episodes of that many new groups
            (split by ``group_id``; the index is 0 for the first draw, so a caller can
            derive distinct seeds). Each draw asks for the groups still missing.
        num_groups: Groups wanted (>= 1).
        max_extra_draws: Draws allowed after the first (>= 0).

    Returns:
        The first `num_groups` groups kept, and the counts (`GroupFill`).

    Raises:
        ValueError: a bad count, episodes without a group id, or a group id seen in an
            earlier draw (the draws must not repeat groups).
    """
    for name, value, least in (
        ("num_groups", num_groups, 1),
        ("max_extra_draws", max_extra_draws, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    kept: list[list[Episode]] = []
    seen: set[str | None] = set()
    drawn = dropped = index = 0
    while len(kept) < num_groups and index <= max_extra_draws:
        for group in _split_groups(draw(num_groups - len(kept), index)):
            if group[0].group_id in seen:
                raise ValueError(f"draw {index} repeated group {group[0].group_id!r}")
            seen.add(group[0].group_id)
            drawn += 1
            if zero_variance(group):
                dropped += 1
            else:
                kept.append(group)
        index += 1
    kept = kept[:num_groups]
    fill = GroupFill(
        episodes=[episode for group in kept for episode in group],
        groups=len(kept),
        drawn=drawn,
        dropped=dropped,
        extra_draws=index - 1,
        shortfall=num_groups - len(kept),
    )
    if fill.shortfall:
        logger.warning(
            "zero-variance filter: %d of %d groups kept after %d extra draws (%d dropped)",
            fill.groups,
            num_groups,
            fill.extra_draws,
            fill.dropped,
        )
    return fill
