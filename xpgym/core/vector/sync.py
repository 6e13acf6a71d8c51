"""`SyncVectorEnv`: sub-envs stepped one after another in the calling thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xpgym.core.env import Env
from xpgym.core.vector.base import (
    AutoresetMode,
    StepResult,
    StepTask,
    SubEnv,
    SubEnvError,
    VectorEnv,
)

__all__ = ["SyncVectorEnv"]


class SyncVectorEnv(VectorEnv):
    """Runs every sub-env in the calling thread: the lowest overhead for cheap envs.

    Takes no ``step_timeout`` (a step running in the caller's thread cannot be interrupted).
    See `xpgym.core.vector.base` for the shared semantics.
    """

    supports_step_timeout = False

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        step_timeout: None = None,
    ) -> None:
        super().__init__(env_fns, autoreset_mode=autoreset_mode, step_timeout=step_timeout)
        self._subenvs = [SubEnv(fn) for fn in self.env_fns]

    @property
    def envs(self) -> list[Env | None]:
        """The sub-env objects (`None` for one discarded after a failure, until its reset)."""
        return [sub.env for sub in self._subenvs]

    def _run_resets(self, tasks):
        results = []
        for i, seed, options in tasks:
            try:
                results.append(self._subenvs[i].reset(seed, options))
            except Exception as exc:
                raise SubEnvError(i, "reset", repr(exc)) from exc
        return results

    def _run_steps(self, tasks: list[StepTask]) -> list[StepResult]:
        subenvs = self._subenvs
        return [subenvs[i].step(action) for i, action in tasks]

    def _run_calls(self, indices: list[int], method: str, *args: Any) -> list[Any]:
        results = []
        for i in indices:
            try:
                results.append(getattr(self._subenvs[i], method)(*args))
            except Exception as exc:
                raise SubEnvError(i, f"{method}{args[:1]}", repr(exc)) from exc
        return results

    def _close_backend(self) -> None:
        for sub in self._subenvs:
            sub.discard()
