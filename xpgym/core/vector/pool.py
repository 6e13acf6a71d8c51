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
plain loop in the caller (a `CallerLoop`) until a task blocks again. The caller reads no
clock in that loop: a watcher thread samples how far the loop got, every
`WorkSharingPool.blocking_threshold` seconds (less often while tasks are short), and when it
has not moved for `WorkSharingPool.STALLED_SAMPLES` samples in a row (the caller is stuck in
one task: 2-3 thresholds or more) hands the tasks the caller has not reached to the helpers,
which run them while the caller's task still waits.

With a timeout the caller does not take tasks (it must stay free to watch the clock). A task
that overruns is reported as `TIMED_OUT`; its thread cannot be killed, so it is abandoned to
the task and a new helper thread replaces it.
"""

from __future__ import annotations

import functools
import itertools
import logging
import operator
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["TIMED_OUT", "CallerLoop", "Failed", "WorkSharingPool"]

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


def _call_at(fn: Callable[[int], Any], start: int, index: int) -> Any:
    return fn(start + index)


class CallerLoop:
    """A batch the calling thread runs as a plain loop, watched by the pool's watcher.

    The caller takes the items from `claims` (an iterator over them, shared with the
    watcher) in order, and keeps the results of the items it took, in order, as a list of
    its own: the loop can be a list comprehension, as in a sync vector env. Taking an item
    is one `next` on a C iterator, so the watcher reads how many were taken from the
    iterator's length hint and can take every item the caller has not reached at once
    (`WorkSharingPool` hands them to its helpers, which run ``fn(position)``); the caller's
    loop then ends, and `WorkSharingPool.finish_loop` appends their results to the caller's.
    """

    __slots__ = ("claims", "fn", "kind", "n", "rest")

    def __init__(self, items: list[Any] | range, fn: Callable[[int], Any], kind: str) -> None:
        self.claims: Iterator[Any] = iter(items)
        self.fn = fn
        self.kind = kind
        self.n = len(items)
        # Set by the watcher when it hands the untaken tasks over: their batch.
        self.rest: _Batch | None = None

    def taken(self) -> int:
        """How many items the caller (or the watcher) has taken from `claims`."""
        return self.n - operator.length_hint(self.claims)


class WorkSharingPool:
    """Helper threads that share a batch's tasks with the caller (see module docstring)."""

    blocking_threshold = 0.001
    """Seconds a task may keep the caller before the rest of its batch goes to the helpers:
    in a shared batch the caller times its tasks; in a `CallerLoop` the watcher samples the
    loop's progress this often."""

    MOVING_PAUSES = 8
    """While a `CallerLoop` finishes a task or more per `blocking_threshold`, the watcher
    samples it every this many thresholds; else every threshold."""

    IDLE_SAMPLES = 100
    """Samples in a row without a `CallerLoop` after which the watcher waits to be woken
    (`start_loop` then wakes it) instead of sampling."""

    STALLED_SAMPLES = 2
    """Samples in a row that must find a `CallerLoop` where it was before the watcher hands
    its untaken tasks over. One is not enough on a busy machine: a caller that waits for a
    core (not for its task) makes no progress for a while either."""

    def __init__(self, num_threads: int, name: str) -> None:
        self._blocks: dict[str, bool] = {}  # kind -> did its last batch have a blocking task?
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # helpers wait here for a batch
        self._loop_started = threading.Condition(self._lock)  # the watcher waits here
        self._batch: _Batch | None = None
        self._loop: CallerLoop | None = None
        self._watcher_idle = False
        self._stopping = False
        self._name = name
        self._abandoned: set[threading.Thread] = set()
        self._threads: list[threading.Thread] = []
        for _ in range(num_threads):
            self._spawn()
        self._watcher = threading.Thread(
            target=self._watch_loops, name=f"{name}-watch", daemon=True
        )
        self._watcher.start()

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
        loop = self.start_loop(range(n), fn, kind) if timeout is None else None
        if loop is None:
            return self._run_shared(fn, n, timeout, kind)
        results: list[Any] = []
        append = results.append
        try:
            for index in loop.claims:
                try:
                    append(fn(index))
                except BaseException as exc:  # reported to the caller, like any failure
                    append(Failed(exc))
        finally:
            self.finish_loop(loop, results)
        return results

    def start_loop(
        self, items: list[Any] | range, fn: Callable[[int], Any], kind: str
    ) -> CallerLoop | None:
        """Start a `CallerLoop` over `items` if the last batch of `kind` did not block, else
        return `None` (run the batch with `run`, on the shared path).

        The caller then runs every item it takes from ``loop.claims``, collecting the
        results in order in a list (or lets an exception propagate), and calls `finish_loop`
        with that list in any case (``try``/``finally``). ``fn(position)`` runs the task at
        that position: the helpers call it for the tasks handed to them. No timeout: a
        batch with a timeout is shared.
        """
        if self._blocks.get(kind, True):
            return None
        loop = CallerLoop(items, fn, kind)
        self._loop = loop
        if self._watcher_idle:  # read after `_loop` is set: see `_await_loop`
            with self._lock:
                self._loop_started.notify()
        return loop

    def finish_loop(self, loop: CallerLoop, results: list[Any]) -> bool:
        """End `loop` once the caller's own loop is over: if the watcher handed tasks to the
        helpers, help run them, wait for them and append their results to `results` (the
        caller's, in order). Returns whether it did (only then can a result be a `Failed`)."""
        with self._lock:
            self._loop = None
            batch = loop.rest
        if batch is None:
            return False
        try:
            self._help_and_wait(batch)
        finally:
            with self._lock:
                self._batch = None
        results.extend(batch.results)
        return True

    def _watch_loops(self) -> None:
        """The watcher thread: idle until a `CallerLoop` starts, then follow the loops."""
        while self._await_loop():
            self._follow_loops()

    def _await_loop(self) -> bool:
        """Wait until a `CallerLoop` runs; `False` once the pool is closing."""
        with self._lock:
            # `_watcher_idle` is set before `_loop` is read, and `start_loop` reads it after
            # setting `_loop`: a loop that starts now is seen here or wakes us.
            self._watcher_idle = True
            while self._loop is None and not self._stopping:
                self._loop_started.wait()
            self._watcher_idle = False
            return not self._stopping

    def _follow_loops(self) -> None:
        """Sample the running `CallerLoop` (and the ones after it) and hand one over when
        it stalls; return once no loop has run for `IDLE_SAMPLES` samples in a row, or the
        pool closes. Not going idle between back-to-back batches spares their caller the
        wake-up call; each sample takes the GIL, which costs the caller a thread switch, so
        while tasks are short (a task or more per threshold) samples are further apart."""
        loop: CallerLoop | None = None
        seen = still = absent = 0
        pauses = 1  # thresholds until the next sample
        while absent < self.IDLE_SAMPLES:
            with self._lock:
                if self._stopping:
                    return
                current = self._loop
                if current is None or current.rest is not None:  # none, or handed over
                    absent += current is None
                    pauses = self.MOVING_PAUSES
                elif current is not loop:  # a new batch: where it is now
                    loop, seen, still, absent, pauses = current, current.taken(), 0, 0, 1
                else:
                    absent = 0
                    progress = loop.taken()
                    moved, seen = progress - seen, progress
                    if moved:
                        still, pauses = 0, self.MOVING_PAUSES if moved >= pauses else 1
                    else:
                        still, pauses = still + 1, 1
                        if still == self.STALLED_SAMPLES:
                            self._hand_over(loop)
            time.sleep(self.blocking_threshold * pauses)

    def _hand_over(self, loop: CallerLoop) -> None:
        """Give every task of `loop` that the caller has not taken to the helpers (called
        with the lock held, while the caller is stuck in one task)."""
        self._blocks[loop.kind] = True
        untaken = list(loop.claims)  # each item is taken once, here or by the caller
        if not untaken:  # the caller is in the batch's last task
            return
        start = loop.n - len(untaken)
        batch = _Batch(
            functools.partial(_call_at, loop.fn, start), len(untaken), watched=False, kind=loop.kind
        )
        loop.rest = batch
        self._batch = batch
        self._cond.notify()  # one helper; each wakes the next as it takes a task

    def _run_shared(
        self, fn: Callable[[int], Any], n: int, timeout: float | None, kind: str
    ) -> list[Any]:
        batch = _Batch(fn, n, watched=timeout is not None, kind=kind)
        self._blocks[kind] = False  # set again by `_drain` if a task blocks this time
        with self._cond:
            self._batch = batch
            self._cond.notify(n if timeout is not None else 1)
        if timeout is None:
            self._help_and_wait(batch)
        else:
            self._watch(batch, timeout)
        with self._cond:
            self._batch = None
        return batch.results

    def _help_and_wait(self, batch: _Batch) -> None:
        """The caller's part of a published batch without a timeout: run tasks of it with the
        helpers, then wait until every task has finished."""
        self._drain(batch, wake_helpers=False)
        if not batch.all_finished():
            batch.done.wait()

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
        with self._lock:
            self._stopping = True
            self._cond.notify_all()
            self._loop_started.notify_all()
        self._watcher.join(join_timeout)
        for thread in self._threads:
            if thread not in self._abandoned:
                thread.join(join_timeout)
        stuck = [t.name for t in self._threads if t.is_alive()]
        if stuck:
            logger.warning("threads still running a stuck sub-env after close: %s", stuck)
