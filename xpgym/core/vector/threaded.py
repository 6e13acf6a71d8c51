"""`ThreadVectorEnv`: sub-envs run on a pool of threads, for I/O-bound envs.

Gymnasium has no thread backend: its `AsyncVectorEnv` runs sub-envs in subprocesses,
which is `ProcessVectorEnv` here.

Threads help when a step waits (an HTTP call, a sandboxed subprocess, a sleep) and the
GIL is released. The threads are a `WorkSharingPool` (``pool.py``): the calling thread runs
cheap steps itself, as a sync vector env would, and the helpers take over as soon as steps
block, so a batch of blocking steps waits on all of them at once.

With ``step_timeout`` the caller does not take tasks (it must stay free to watch the
clock). A step that overruns is reported as truncated with ``info["error"]``; its thread
cannot be killed, so the sub-env is abandoned to it, a fresh one is built from the factory,
and a new helper thread replaces the stuck one. Prefer ``ProcessVectorEnv`` for envs that
may hang: a process can be killed.
"""

from __future__ import annotations

import itertools
import logging
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
    error_info,
)
from xpgym.core.vector.pool import TIMED_OUT, Failed, WorkSharingPool

__all__ = ["ThreadVectorEnv"]

logger = logging.getLogger(__name__)


class ThreadVectorEnv(VectorEnv):
    """Runs sub-envs on threads: for envs whose steps wait on I/O or subprocesses.

    Args:
        env_fns: One factory per sub-env.
        autoreset_mode: See `xpgym.core.vector.base`.
        step_timeout: Seconds a step or reset may take; an overrunning step is truncated
            with ``info["error"]`` and its sub-env rebuilt (see module docstring).
        num_threads: Helper threads (default `num_envs`, so every sub-env can wait at once).
        start_timeout: Seconds the sub-envs may take to be built; past it the constructor
            raises `SubEnvError(index, "construction")` and the thread stuck in the build is
            abandoned (it ends when the factory returns; that env is then dropped unclosed).
            `None` waits.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        step_timeout: float | None = None,
        num_threads: int | None = None,
        start_timeout: float | None = None,
    ) -> None:
        super().__init__(
            env_fns,
            autoreset_mode=autoreset_mode,
            step_timeout=step_timeout,
            start_timeout=start_timeout,
        )
        num_threads = self.num_envs if num_threads is None else num_threads
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        self._pool = WorkSharingPool(num_threads, name=f"xpgym-vec-{id(self):x}")
        try:
            fns = self.env_fns
            built = self._pool.run(lambda i: SubEnv(fns[i]), self.num_envs, start_timeout)
            for i, sub in enumerate(built):
                if sub is TIMED_OUT or isinstance(sub, Failed):
                    for other in built:  # the ones that were built are not leaked
                        if isinstance(other, SubEnv):
                            other.discard()
                if sub is TIMED_OUT:
                    raise SubEnvError(i, "construction", f"not built within {start_timeout}s")
                if isinstance(sub, Failed):
                    raise SubEnvError(i, "construction", repr(sub.exc)) from sub.exc
            self._subenvs: list[SubEnv] = built
        except BaseException:
            self._pool.close()
            raise

    def _abandon(self, i: int) -> None:
        """Give sub-env `i` up to the thread stuck in it; the next reset builds a new one."""
        self._subenvs[i] = self._subenvs[i].abandoned()

    def _run_resets(self, tasks):
        subenvs = self._subenvs
        results = self._pool.run(
            lambda j: subenvs[tasks[j][0]].reset(tasks[j][1], tasks[j][2]),
            len(tasks),
            self.step_timeout,
            "reset",
        )
        for (i, _, _), result in zip(tasks, results, strict=True):
            if result is TIMED_OUT:
                self._abandon(i)
                raise SubEnvError(i, "reset", f"timed out after {self.step_timeout}s")
            if isinstance(result, Failed):
                raise SubEnvError(i, "reset", repr(result.exc)) from result.exc
        return results

    def _run_steps(self, tasks: list[StepTask]) -> list[StepResult]:
        subenvs = self._subenvs

        def run_task(j: int) -> StepResult:
            return subenvs[tasks[j][0]].step(tasks[j][1])

        pool = self._pool
        loop = pool.start_loop(tasks, run_task, "step") if self.step_timeout is None else None
        if loop is None:
            results = pool.run(run_task, len(tasks), self.step_timeout, "step")
        else:  # steps have not been blocking: the loop a sync vector env runs
            results = []
            try:
                results = [subenvs[i].step(action) for i, action in loop.claims]
            finally:
                handed_over = pool.finish_loop(loop, results)
            if not handed_over:
                return results
        if all(map(isinstance, results, itertools.repeat(tuple))):  # each one a step's result
            return results
        for j, (i, _) in enumerate(tasks):
            if isinstance(results[j], Failed):  # only a BaseException escapes SubEnv.step
                raise results[j].exc
            if results[j] is TIMED_OUT:
                last_obs = subenvs[i].last_obs
                self._abandon(i)
                info = error_info(TimeoutError(f"sub-env {i} step took over {self.step_timeout}s"))
                results[j] = (last_obs, 0.0, False, True, info)
        return results

    def _run_calls(self, indices: list[int], method: str, *args: Any) -> list[Any]:
        subenvs = self._subenvs
        results = self._pool.run(
            lambda j: getattr(subenvs[indices[j]], method)(*args), len(indices), self.step_timeout
        )
        for i, result in zip(indices, results, strict=True):
            if result is TIMED_OUT:
                self._abandon(i)
                raise SubEnvError(i, method, f"timed out after {self.step_timeout}s")
            if isinstance(result, Failed):
                raise SubEnvError(i, f"{method}{args[:1]}", repr(result.exc)) from result.exc
        return results

    def _close_backend(self) -> None:
        try:
            subenvs = self._subenvs
            self._pool.run(lambda i: subenvs[i].discard(), len(subenvs), self.step_timeout)
        finally:
            self._pool.close()
