"""`WorkSharingPool`: helper threads that share a batch of tasks with the calling thread.

Used by `ThreadVectorEnv` (the sub-envs of a vector env) and by `SubEnvHost` (the sub-envs
of one worker process or Ray actor). Threads help when a task waits (an HTTP call, a
sandboxed subprocess, a sleep) and the GIL is released. For pure-Python tasks threads cannot
run in parallel, and handing every task to another thread costs more than the task itself
(GEM's thread pool is 4x slower than its loop). So the pool shares work instead of handing
it off: the calling thread runs tasks itself, and wakes one helper thread, which wakes the
next only when it finds work. A batch of cheap tasks finishes in the caller before any
helper gets the GIL; a batch of blocking tasks spreads over the helpers as fast as each
blocks.

The pool learns, per kind of batch (``"step"``, ``"reset"``, ...), whether its tasks block.
The first batch of a kind is shared (so the first batch of blocking steps already waits on
all of them at once); after a batch whose tasks did not block, batches of that kind run as a
plain loop in the caller (`run`'s inline path) until a task blocks again, which hands the
rest of that batch to the helpers.

With a timeout the caller does not take tasks (it must stay free to watch the clock). A task
that overruns is reported as `TIMED_OUT`; its thread cannot be killed, so it is abandoned to
the task and a new helper thread replaces it.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["TIMED_OUT", "Failed", "WorkSharingPool"]

logger = logging.getLogger(__name__)


class Failed:
    """A task that raised; carries the exception."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


TIMED_OUT = object()
_PENDING = object()


class _Batch:
    """Tasks ``fn(0) .. fn(n - 1)`` and the bookkeeping to finish (or give up on) each.

    Claiming a task is one `next()` on an `itertools.count` (atomic under the GIL), so the
    common path takes no lock. With `watched` (a timeout is set) each claim also records
    when and by whom it started, and finishing takes a lock, because the watcher may give
    up on a task at the moment it finishes.
    """

    def __init__(self, fn: Callable[[int], Any], n: int, *, watched: bool, kind: str) -> None:
        self.fn = fn
        self.n = n
        self.kind = kind
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


class WorkSharingPool:
    """Helper threads that share a batch's tasks with the caller (see module docstring)."""

    blocking_threshold = 0.001
    """Seconds a task may run in the caller before the caller wakes a helper thread."""

    def __init__(self, num_threads: int, name: str) -> None:
        self._blocks: dict[str, bool] = {}  # kind -> did its last batch have a blocking task?
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
                while not self._stopping:
                    batch = self._batch
                    if batch is not None and batch.has_pending():
                        break
                    self._cond.wait()
                else:
                    return
            self._drain(batch, wake_helpers=True)
            if me in self._abandoned:  # its task overran; a replacement already exists
                return

    def _drain(self, batch: _Batch, *, wake_helpers: bool) -> None:
        """Claim and run tasks until none is left. Helpers (`wake_helpers`) wake one more
        helper per task they claim; the caller records whether any of its tasks blocked,
        which keeps the pool on the shared path for the next batch of that kind."""
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
                results[index] = Failed(exc)
            finished.append(None)
            now = clock()
            if not wake_helpers and now - last > threshold:
                self._blocks[batch.kind] = True
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
                result = Failed(exc)
            batch.finish(index, result)
            if threading.current_thread() in self._abandoned:
                return

    def run(
        self, fn: Callable[[int], Any], n: int, timeout: float | None, kind: str = "task"
    ) -> list[Any]:
        """Run ``fn(i)`` for ``i in range(n)``; return the results in order: a `Failed` for
        a call that raised, `TIMED_OUT` for one still running `timeout` s after it began.

        `kind` names what the tasks do (``"step"``, ``"reset"``): whether they block is
        learned per kind (see the module docstring). One batch runs at a time: `run` is
        called from one thread.
        """
        if timeout is None and not self._blocks.get(kind, True):
            return self._run_inline(fn, n, kind)
        return self._run_shared(fn, n, timeout, kind)

    def _run_inline(self, fn: Callable[[int], Any], n: int, kind: str) -> list[Any]:
        """Fast path while tasks do not block: a plain loop in the caller, as in a sync
        vector env. The first task that blocks hands the remaining ones to the helpers."""
        results: list[Any] = [None] * n
        clock, threshold = time.perf_counter, self.blocking_threshold
        last = clock()
        for index in range(n):
            try:
                results[index] = fn(index)
            except BaseException as exc:  # reported to the caller, like any failure
                results[index] = Failed(exc)
            now = clock()
            if now - last > threshold:
                self._blocks[kind] = True
                if index + 1 < n:
                    start = index + 1
                    rest = functools.partial(_offset_call, fn, start)
                    results[start:] = self._run_shared(rest, n - start, None, kind)
                    break
            last = now
        return results

    def _run_shared(
        self, fn: Callable[[int], Any], n: int, timeout: float | None, kind: str
    ) -> list[Any]:
        batch = _Batch(fn, n, watched=timeout is not None, kind=kind)
        self._blocks[kind] = False  # set again by `_drain` if a task blocks this time
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
                if now - start >= timeout and batch.finish(i, TIMED_OUT):
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
