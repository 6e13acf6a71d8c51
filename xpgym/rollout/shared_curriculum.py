"""A difficulty curriculum shared by processes through a file.

A trainer's hook runs in many workers (verl's agent-loop workers, OpenRLHF's engine actors,
RL2's ranks, ROLL's env managers, Oat's actors), none of which sees the others' episodes; a
`SuccessRateScheduler` in each would move each worker's levels on its own results.
`SharedCurriculum` is one such scheduler whose configuration and state live in a JSON file
that every process opens:

* `SharedCurriculum.create(path, ladders, ...)` writes the file (the ladders, the rule's
  arguments, every family at its start level);
* ``SharedCurriculum(path)`` opens it in any process (`shared_curriculum` opens it once per
  process and path); the object pickles as its path, so it can be sent to workers;
* reads (`levels`, `make_env`, `apply`, `metrics`) read the file as it is now;
* `observe` and `record` take an exclusive ``fcntl.flock`` on ``<path>.lock``, load the
  state, apply `SuccessRateScheduler`'s rule and replace the file atomically (a temporary
  file in the same directory, then ``os.replace``): concurrent writers lose no result, a
  reader never sees a partial file, and the levels are those of one scheduler fed every
  result in the order the writers took the lock.

The ladders are stored as data: `PresetLadder` (its family) and `KnobLadder` (its family and
`Knob`); the success rule is `episode_succeeded` (``info["correct"]`` on the last turn), the
one a hook that sees only a GEM env's last step can apply too. Other ladders or success rules
need an in-process `SuccessRateScheduler`.

Scope: ``flock`` works between the processes of one machine. Across machines, the file must
be on a filesystem whose locks every host honours (most network filesystems do not promise
it); otherwise run the scheduler in one process.

File format (``"format": "xpgym-curriculum/1"``)::

    {"format": ..., "ladders": [{"family": ..., "knob": null | {argument, low, high, stride,
     fixed}}], "rule": {target, tolerance, window, start_level, min_level, max_level},
     "state": SuccessRateScheduler.state_dict(), "results": results taken so far}
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from xpgym.core.trajectory import Episode
from xpgym.core.vector import VectorEnv
from xpgym.rollout.curriculum import (
    DifficultyEnv,
    DifficultyLadder,
    Knob,
    KnobLadder,
    PresetLadder,
    SuccessRateScheduler,
    ladder_among,
)

__all__ = ["FORMAT", "SharedCurriculum", "shared_curriculum"]

logger = logging.getLogger(__name__)

FORMAT = "xpgym-curriculum/1"
"""The ``format`` field of a shared curriculum file."""

_RULE_ARGS = ("target", "tolerance", "window", "start_level", "min_level", "max_level")


def _ladder_to_json(ladder: DifficultyLadder) -> dict[str, Any]:
    if isinstance(ladder, PresetLadder):
        return {"family": ladder.family, "knob": None}
    if isinstance(ladder, KnobLadder):
        return {
            "family": ladder.family,
            "knob": {**ladder.knob._asdict(), "fixed": dict(ladder.knob.fixed)},
        }
    raise TypeError(
        f"a shared curriculum stores PresetLadder and KnobLadder only, got {type(ladder).__name__} "
        "(use an in-process SuccessRateScheduler for other ladders)"
    )


def _ladder_from_json(entry: Mapping[str, Any]) -> DifficultyLadder:
    knob = entry["knob"]
    if knob is None:
        return PresetLadder(entry["family"])
    return KnobLadder(entry["family"], Knob(**knob))


class SharedCurriculum:
    """A `SuccessRateScheduler` whose state is the file at `path` (module docstring).

    It has the scheduler's interface (`levels`, `make_env`, `apply`, `observe`, `record`,
    `metrics`), so it goes wherever one goes (the reference trainer's ``schedulers``, TRL's
    ``make_rollout_func(curriculum=...)``), and every call sees the results of every process.

    Args:
        path: A file written by `create`.

    Raises:
        FileNotFoundError: no file at `path` (the message says how to make one).
        ValueError: the file is not a shared curriculum of this format, or its state does not
            fit its ladders.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        data = self._read()
        try:
            self.ladders: tuple[DifficultyLadder, ...] = tuple(
                _ladder_from_json(entry) for entry in data["ladders"]
            )
            self.rule: dict[str, Any] = {name: data["rule"][name] for name in _RULE_ARGS}
            self._scheduler(data)  # checks the rule and the state against the ladders
        except (KeyError, TypeError) as err:
            raise ValueError(f"{self.path} is not a valid shared curriculum: {err!r}") from None
        self._lock = threading.Lock()

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        ladders: Sequence[DifficultyLadder],
        *,
        target: float = 0.5,
        tolerance: float = 0.1,
        window: int = 32,
        start_level: int = 0,
        min_level: int = 0,
        max_level: int | None = None,
        exist_ok: bool = False,
    ) -> SharedCurriculum:
        """Write a new shared curriculum at `path` (parents made) and open it.

        The rule's arguments are `SuccessRateScheduler`'s (checked the same way).

        Raises:
            FileExistsError: `path` exists and not `exist_ok` (a file left by an earlier
                run would carry its levels into this one; with `exist_ok` it is replaced).
            TypeError: a ladder other than `PresetLadder` or `KnobLadder`.
            ValueError: as `SuccessRateScheduler`.
        """
        path = Path(path)
        rule: dict[str, Any] = dict(
            target=target,
            tolerance=tolerance,
            window=window,
            start_level=start_level,
            min_level=min_level,
            max_level=max_level,
        )
        scheduler = SuccessRateScheduler(ladders, **rule)
        data = {
            "format": FORMAT,
            "ladders": [_ladder_to_json(ladder) for ladder in ladders],
            "rule": rule,
            "state": scheduler.state_dict(),
            "results": 0,
        }
        if path.exists() and not exist_ok:
            raise FileExistsError(
                f"{path} exists (a curriculum of an earlier run?); remove it or pass exist_ok=True"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(path, data)
        logger.info("shared curriculum at %s: levels %s", path, scheduler.levels)
        return cls(path)

    def __reduce__(self) -> tuple[type[SharedCurriculum], tuple[str]]:
        return SharedCurriculum, (str(self.path),)

    def __repr__(self) -> str:
        return f"SharedCurriculum({str(self.path)!r})"

    # ---- reads -------------------------------------------------------------------------

    def scheduler(self) -> SuccessRateScheduler:
        """A `SuccessRateScheduler` holding the file's current state (a copy: changing it does
        not change the file)."""
        return self._scheduler(self._read())

    @property
    def levels(self) -> dict[str, int]:
        """Each family's current level (read now)."""
        return {family: entry["level"] for family, entry in self._read()["state"].items()}

    @property
    def results(self) -> int:
        """How many results `observe` and `record` have taken, from every process (including
        those not counted by the rule: another level's, an unknown family's)."""
        return int(self._read()["results"])

    def ladder(self, env_id: str) -> DifficultyLadder:
        """The ladder of `env_id`'s family (`SuccessRateScheduler.ladder`; no file read)."""
        return ladder_among(self.ladders, env_id)

    def make_env(self, env_id: str) -> DifficultyEnv:
        """A `DifficultyEnv` of `env_id`'s family at its current level
        (`SuccessRateScheduler.make_env`)."""
        return self.scheduler().make_env(env_id)

    def apply(self, vec_env: VectorEnv, step: int) -> None:
        """``vec_env.call("set_difficulty_levels", levels)`` with the current levels."""
        vec_env.call("set_difficulty_levels", self.levels)

    def metrics(self) -> dict[str, float]:
        """`SuccessRateScheduler.metrics` of the current state, and ``curriculum/results``."""
        data = self._read()
        return {**self._scheduler(data).metrics(), "curriculum/results": float(data["results"])}

    # ---- writes ------------------------------------------------------------------------

    def observe(self, episodes: Sequence[Episode]) -> None:
        """`SuccessRateScheduler.observe` on the shared state (under the file lock)."""
        if episodes:
            self._update(lambda scheduler: scheduler.observe(episodes), len(episodes))

    def record(self, family: str, level: int, success: bool) -> None:
        """`SuccessRateScheduler.record` on the shared state (under the file lock)."""
        self._update(lambda scheduler: scheduler.record(family, level, success), 1)

    # ---- the file ----------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no shared curriculum at {self.path}: make one with SharedCurriculum.create"
            ) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{self.path} is not a shared curriculum (not JSON: {err})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{self.path} is not a shared curriculum of format {FORMAT!r}")
        return data

    def _scheduler(self, data: Mapping[str, Any]) -> SuccessRateScheduler:
        scheduler = SuccessRateScheduler(self.ladders, **self.rule)
        scheduler.load_state_dict(data["state"])
        return scheduler

    def _update(self, change: Callable[[SuccessRateScheduler], None], count: int) -> None:
        lock_path = self.path.with_name(self.path.name + ".lock")
        with self._lock, lock_path.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            data = self._read()
            scheduler = self._scheduler(data)
            before = scheduler.levels
            change(scheduler)
            data["state"] = scheduler.state_dict()
            data["results"] = int(data["results"]) + count
            _write_atomic(self.path, data)
        if scheduler.levels != before:
            logger.info(
                "shared curriculum %s: levels %s -> %s", self.path, before, scheduler.levels
            )


def _write_atomic(path: Path, data: Mapping[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_OPENED: dict[str, SharedCurriculum] = {}
_OPENED_LOCK = threading.Lock()


def shared_curriculum(path: str | os.PathLike[str]) -> SharedCurriculum:
    """`SharedCurriculum(path)`, opened once per process and path (thread-safe): what the
    hooks use for a task's ``curriculum`` (`xpgym.rollout.runner.EpisodeTask`)."""
    key = os.fspath(path)
    with _OPENED_LOCK:
        opened = _OPENED.get(key)
        if opened is None:
            opened = _OPENED[key] = SharedCurriculum(key)
    return opened
