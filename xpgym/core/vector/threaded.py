"""`ThreadVectorEnv`: sub-envs run on a pool of threads, for I/O-bound envs.

Called `AsyncVectorEnv` before (still importable from `xpgym.core.vector` under that name,
with a `DeprecationWarning`); in Gymnasium, `AsyncVectorEnv` runs sub-envs in subprocesses,
which is `ProcessVectorEnv` here.

Threads help when a step waits (an HTTP call, a sandboxed subprocess, a sleep) and the
GIL is released. For pure-Python envs threads cannot run in parallel, and handing every
step to another thread costs more than the step itself (GEM's thread pool is 4x slower than
its loop). So the pool here shares work instead of handing it off: the calling thread runs
tasks itself, and wakes one helper thread, which wakes the next only when it finds work.
A batch of cheap steps finishes in the caller before any helper gets the GIL; a batch of
blocking steps spreads over the helpers as fast as each blocks.

With ``step_timeout`` the caller does not take tasks (it must stay free to watch the
clock). A step that overruns is reported as truncated with ``info["error"]``; its thread
cannot be killed, so the sub-env is abandoned to it, a fresh one is built from the factory,
and a new helper thread replaces the stuck one. Prefer ``ProcessVectorEnv`` for envs that
may hang: a process can be killed.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
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

__all__ = ["ThreadVectorEnv"]

logger = logging.getLogger(__name__)


class _Failed:
    """A task that raised; carries the exception."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_TIMED_OUT = object()
_PENDING = object()


class _Batch:
    """Tasks ``fn(0) .. fn(n - 1)`` and the bookkeeping to finish (or give up on) each.

    Claiming a task is one `next()` on an `itertools.count` (atomic under the GIL), so the
    common path takes no lock. With `watched` (a timeout is set) each claim also records
    when and by whom it started, and finishing takes a lock, because the watcher may give
    up on a task at the moment it finishes.
    """

    def __init__(self, fn: Callable[[int], Any], n: int, *, watched: bool) -> None:
        self.fn = fn
        self.n = n
        self.results: list[Any] = [_PENDING] * n
        self.watched = watched
        self.started: list[float | None] = [None] * n
        self.owners: list[threading.Thread | None] = [None] * n
        self.claimed = 0  # a lower bound on claims made, for cheap `has_pending` checks
        self.claims = itertools.count()
        self.finished: list[None] = []  # append-only: its length counts finished tasks
        self._lock = threading.Lock()
        self.done = threading.Event()
        if n == 0:
            self.done.set()

    def has_pending(self) -> bool:
        return self.claimed < self.n

    def take(self) -> int | None:
        index = next(self.claims)
        self.claimed = min(index + 1, self.n)
        if index >= self.n:
            return None
        if self.watched:
            self.owners[index] = threading.current_thread()
            self.started[index] = time.monotonic()
        return index

    def finish(self, index: int, result: Any) -> bool:
        """Store a result unless the task was already given up on; return whether stored."""
        if self.watched:
            with self._lock:
                if self.results[index] is not _PENDING:
                    return False
                self.results[index] = result
        else:
            self.results[index] = result
        self.finished.append(None)
        if len(self.finished) == self.n:
            self.done.set()
        return True

    def all_finished(self) -> bool:
        return len(self.finished) == self.n


def _offset_call(fn: Callable[[int], Any], offset: int, index: int) -> Any:
    return fn(offset + index)


class _WorkSharingPool:
    """Helper threads that share a batch's tasks with the caller (see module docstring)."""

    blocking_threshold = 0.001
    """Seconds a task may run in the caller before the caller wakes a helper thread."""

    def __init__(self, num_threads: int, name: str) -> None:
        self._helpers_needed = False  # did the last batch have a blocking task?
        self._cond = threading.Condition()
        self._batch: _Batch | None = None
        self._stopping = False
        self._name = name
        self._abandoned: set[threading.Thread] = set()
        self._threads: list[threading.Thread] = []
        for _ in range(num_threads):
            self._spawn()

    def _spawn(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        me = threading.current_thread()
        while True:
            with self._cond:
                while not self._stopping and not (self._batch and self._batch.has_pending()):
                    self._cond.wait()
                if self._stopping:
                    return
                batch = self._batch
            self._drain(batch, wake_helpers=True)  # type: ignore[arg-type]
            if me in self._abandoned:  # its task overran; a replacement already exists
                return

    def _drain(self, batch: _Batch, *, wake_helpers: bool) -> None:
        """Claim and run tasks until none is left. Helpers (`wake_helpers`) wake one more
        helper per task they claim; the caller records whether any of its tasks blocked,
        which keeps the pool on the shared path for the next batch."""
        if batch.watched:
            self._drain_watched(batch, wake_helpers=wake_helpers)
            return
        fn, n, results, finished = batch.fn, batch.n, batch.results, batch.finished
        clock, threshold = time.perf_counter, self.blocking_threshold
        last = clock()
        for index in batch.claims:
            if index >= n:
                batch.claimed = n
                break
            batch.claimed = index + 1
            if wake_helpers and index + 1 < n:
                with self._cond:
                    self._cond.notify()
            try:
                results[index] = fn(index)
            except BaseException as exc:  # reported to the caller, never lost in a thread
                results[index] = _Failed(exc)
            finished.append(None)
            now = clock()
            if not wake_helpers and now - last > threshold:
                self._helpers_needed = True
            last = now
        if len(finished) == n:
            batch.done.set()

    def _drain_watched(self, batch: _Batch, *, wake_helpers: bool) -> None:
        fn = batch.fn
        while (index := batch.take()) is not None:
            if wake_helpers and batch.has_pending():
                with self._cond:
                    self._cond.notify()
            try:
                result = fn(index)
            except BaseException as exc:
                result = _Failed(exc)
            batch.finish(index, result)
            if threading.current_thread() in self._abandoned:
                return

    def run(self, fn: Callable[[int], Any], n: int, timeout: float | None) -> list[Any]:
        """Run ``fn(i)`` for ``i in range(n)``; return the results in order: a `_Failed` for
        a call that raised, `_TIMED_OUT` for one still running `timeout` s after it began."""
        if timeout is None and not self._helpers_needed:
            return self._run_inline(fn, n)
        return self._run_shared(fn, n, timeout)

    def _run_inline(self, fn: Callable[[int], Any], n: int) -> list[Any]:
        """Fast path while tasks do not block: a plain loop in the caller, as in a sync
        vector env. The first task that blocks hands the remaining ones to the helpers."""
        results: list[Any] = [None] * n
        clock, threshold = time.perf_counter, self.blocking_threshold
        last = clock()
        for index in range(n):
            try:
                results[index] = fn(index)
            except BaseException as exc:  # reported to the caller, like any failure
                results[index] = _Failed(exc)
            now = clock()
            if now - last > threshold and index + 1 < n:
                self._helpers_needed = True
                start = index + 1
                rest = functools.partial(_offset_call, fn, start)
                results[start:] = self._run_shared(rest, n - start, None)
                break
            last = now
        return results

    def _run_shared(self, fn: Callable[[int], Any], n: int, timeout: float | None) -> list[Any]:
        batch = _Batch(fn, n, watched=timeout is not None)
        self._helpers_needed = False  # set again by `_drain` if a task blocks this time
        with self._cond:
            self._batch = batch
            self._cond.notify(n if timeout is not None else 1)
        if timeout is None:
            self._drain(batch, wake_helpers=False)
            if not batch.all_finished():
                batch.done.wait()
        else:
            self._watch(batch, timeout)
        with self._cond:
            self._batch = None
        return batch.results

    def _watch(self, batch: _Batch, timeout: float) -> None:
        while not batch.done.is_set():
            now = time.monotonic()
            running = [
                (start, i)
                for i, start in enumerate(batch.started)
                if start is not None and batch.results[i] is _PENDING
            ]
            for start, i in running:
                if now - start >= timeout and batch.finish(i, _TIMED_OUT):
                    owner = batch.owners[i]
                    assert owner is not None
                    self._abandoned.add(owner)
                    self._spawn()
                    logger.warning(
                        "task %d overran %.3gs; thread %s abandoned", i, timeout, owner.name
                    )
            next_deadline = min((s + timeout for s, _ in running), default=now + timeout)
            batch.done.wait(max(next_deadline - time.monotonic(), 0.001))

    def close(self, join_timeout: float = 5.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for thread in self._threads:
            if thread not in self._abandoned:
                thread.join(join_timeout)
        stuck = [t.name for t in self._threads if t.is_alive()]
        if stuck:
            logger.warning("threads still running a stuck sub-env after close: %s", stuck)


class ThreadVectorEnv(VectorEnv):
    """Runs sub-envs on threads: for envs whose steps wait on I/O or subprocesses.

    Args:
        env_fns: One factory per sub-env.
        autoreset_mode: See `xpgym.core.vector.base`.
        step_timeout: Seconds a step or reset may take; an overrunning step is truncated
            with ``info["error"]`` and its sub-env rebuilt (see module docstring).
        num_threads: Helper threads (default `num_envs`, so every sub-env can wait at once).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        step_timeout: float | None = None,
        num_threads: int | None = None,
    ) -> None:
        super().__init__(env_fns, autoreset_mode=autoreset_mode, step_timeout=step_timeout)
        num_threads = self.num_envs if num_threads is None else num_threads
        if num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {num_threads}")
        self._pool = _WorkSharingPool(num_threads, name=f"xpgym-vec-{id(self):x}")
        try:
            fns = self.env_fns
            built = self._pool.run(lambda i: SubEnv(fns[i]), self.num_envs, None)
            self._subenvs: list[SubEnv] = []
            for i, sub in enumerate(built):
                if isinstance(sub, _Failed):
                    raise SubEnvError(i, "construction", repr(sub.exc)) from sub.exc
                self._subenvs.append(sub)
        except BaseException:
            self._pool.close()
            raise

    def _abandon(self, i: int) -> None:
        """Give sub-env `i` up to the thread stuck in it; the next reset builds a new one."""
        stuck = self._subenvs[i]
        fresh = SubEnv(self.env_fns[i], build=False)
        fresh.last_obs = stuck.last_obs
        self._subenvs[i] = fresh

    def _run_resets(self, tasks):
        subenvs = self._subenvs
        results = self._pool.run(
            lambda j: subenvs[tasks[j][0]].reset(tasks[j][1], tasks[j][2]),
            len(tasks),
            self.step_timeout,
        )
        for (i, _, _), result in zip(tasks, results, strict=True):
            if result is _TIMED_OUT:
                self._abandon(i)
                raise SubEnvError(i, "reset", f"timed out after {self.step_timeout}s")
            if isinstance(result, _Failed):
                raise SubEnvError(i, "reset", repr(result.exc)) from result.exc
        return results

    def _run_steps(self, tasks: list[StepTask]) -> list[StepResult]:
        subenvs = self._subenvs
        results = self._pool.run(
            lambda j: subenvs[tasks[j][0]].step(tasks[j][1]), len(tasks), self.step_timeout
        )
        for j, (i, _) in enumerate(tasks):
            if isinstance(results[j], _Failed):  # only a BaseException escapes SubEnv.step
                raise results[j].exc
            if results[j] is _TIMED_OUT:
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
            if result is _TIMED_OUT:
                self._abandon(i)
                raise SubEnvError(i, method, f"timed out after {self.step_timeout}s")
            if isinstance(result, _Failed):
                raise SubEnvError(i, f"{method}{args[:1]}", repr(result.exc)) from result.exc
        return results

    def _close_backend(self) -> None:
        try:
            subenvs = self._subenvs
            self._pool.run(lambda i: subenvs[i].discard(), len(subenvs), self.step_timeout)
        finally:
            self._pool.close()
