"""`ProcessVectorEnv`: sub-envs live in worker processes, for CPU-bound envs.

Each worker process hosts several sub-envs (by default the sub-envs are split evenly over
one worker per CPU), so a batch costs one message round trip per worker, not per sub-env.
Workers step their sub-envs in parallel with each other, and each worker steps its own
sub-envs concurrently on ``threads_per_worker`` threads: cheap steps run one after another
in the worker's main thread, steps that block (I/O, a sandbox, a sleep) wait all at once
(see `xpgym.core.vector.hosted`).

Timeouts (``step_timeout``): inside the worker, a step that overruns is reported as
truncated with ``info["error"]``, and only that sub-env is rebuilt; with one thread per
worker (the default with a timeout) the step is interrupted by a ``SIGALRM`` timer, with
several it is left to a thread the worker abandons. If a worker stops answering
altogether (a hang in C code, a crash), or is found dead when a batch is sent to it (it died
between two steps), the parent kills it, starts a new one, and reports every sub-env it
hosted and had not finished as truncated with ``info["error"]``.

Env factories and wrappers must pickle (module-level functions, classes, or
`functools.partial` of them), as for any ``multiprocessing`` program; and a script that
builds a ``ProcessVectorEnv`` at top level needs the usual ``if __name__ == "__main__":``
guard, because workers are started with the ``spawn`` method by default.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing as mp
import os
import pickle
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from xpgym.core.env import Env
from xpgym.core.vector.base import AutoresetMode, SubEnvError
from xpgym.core.vector.hosted import HostedVectorEnv, SubEnvHost

__all__ = ["ProcessVectorEnv"]

logger = logging.getLogger(__name__)

_GRACE_SECONDS = 5.0  # a worker gets this long beyond its sub-envs' timeouts to answer


def _worker_main(
    conn: Connection,
    env_fns: dict[int, Callable[[], Env]],
    step_timeout: float | None,
    build: bool,
    threads: int,
) -> None:
    """Worker loop: build a `SubEnvHost`, then answer one batch per message until `close`.

    Messages are ``(command, payload)``; every command gets exactly one reply, the list
    `SubEnvHost.run` returns (one ``("ok", result)`` or ``("error", text)`` per task).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        host = SubEnvHost(env_fns, step_timeout, build, threads)
        conn.send([("ok", None)])
    except Exception as exc:
        conn.send([("error", f"construction: {exc!r}")])
        return
    while True:
        try:
            command, payload = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            command, payload = "close", None
        if command == "close":
            host.close()
            with contextlib.suppress(BrokenPipeError, OSError):
                conn.send([("ok", None)])
            return
        conn.send(host.run(command, payload))


class _Worker:
    """The parent's handle on one worker process."""

    def __init__(
        self,
        ctx: Any,
        indices: list[int],
        env_fns: Sequence[Callable[[], Env]],
        step_timeout: float | None,
        build: bool,
        threads: int,
    ) -> None:
        self.indices = indices
        self.conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(
            target=_worker_main,
            args=(child_conn, {i: env_fns[i] for i in indices}, step_timeout, build, threads),
            name=f"xpgym-vec-worker-{indices[0]}",
            daemon=True,
        )
        self.process.start()
        child_conn.close()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class ProcessVectorEnv(HostedVectorEnv):
    """Runs sub-envs in worker processes: true parallelism for CPU-bound envs.

    Args:
        env_fns: One picklable factory per sub-env.
        autoreset_mode: See `xpgym.core.vector.base`.
        step_timeout: Seconds a step or reset may take (see module docstring).
        num_workers: Worker processes (default: `min(num_envs, os.cpu_count())`).
        threads_per_worker: Sub-envs a worker may step at once (see the module docstring).
            Default: all the sub-envs it hosts, or 1 with a `step_timeout` (so that an
            overrunning step is interrupted, not abandoned to its thread).
        context: ``multiprocessing`` start method (default ``"spawn"``).
        start_timeout: Seconds a worker may take to start and build its sub-envs, at
            construction and when it replaces a dead one; past it the worker is killed and
            `SubEnvError(index, "construction")` raised. `None` waits.
    """

    host_kind = "worker process"

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        *,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        step_timeout: float | None = None,
        num_workers: int | None = None,
        threads_per_worker: int | None = None,
        context: str = "spawn",
        start_timeout: float | None = None,
    ) -> None:
        super().__init__(
            env_fns,
            autoreset_mode=autoreset_mode,
            step_timeout=step_timeout,
            start_timeout=start_timeout,
        )
        num_workers = min(self.num_envs, num_workers or os.cpu_count() or 1)
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        self.threads_per_worker = self._host_threads(
            "threads_per_worker", threads_per_worker, -(-self.num_envs // num_workers)
        )
        for i, fn in enumerate(self.env_fns):
            try:
                pickle.dumps(fn)
            except Exception as exc:
                raise TypeError(
                    f"env factory {i} ({fn!r:.80}) cannot be pickled for a worker process: "
                    f"{exc}. Use module-level functions or functools.partial, or "
                    "vectorization_mode='thread'"
                ) from exc
        self._ctx = mp.get_context(context)
        self._worker_of = [0] * self.num_envs
        groups = [list(range(self.num_envs))[w::num_workers] for w in range(num_workers)]
        self._workers: list[_Worker] = []
        try:
            for w, indices in enumerate(groups):
                for i in indices:
                    self._worker_of[i] = w
                self._workers.append(self._start_worker(indices))
            for w in range(len(self._workers)):
                self._check_started(w, "worker")
        except BaseException:
            for worker in self._workers:
                worker.kill()
            raise

    def _start_worker(self, indices: list[int], *, build: bool = True) -> _Worker:
        threads = min(self.threads_per_worker, len(indices))
        return _Worker(self._ctx, indices, self.env_fns, self.step_timeout, build, threads)

    def _receive(self, worker: _Worker, timeout: float | None) -> list[tuple[str, Any]] | None:
        """The worker's reply, or `None` if it died or did not answer within `timeout`."""
        try:
            if timeout is not None and not worker.conn.poll(timeout):
                return None
            return worker.conn.recv()
        except (EOFError, OSError):
            return None

    @staticmethod
    def _answers_within(worker: _Worker, timeout: float) -> bool:
        """Whether `worker` replies (or is found dead: EOF) within `timeout` seconds."""
        try:
            return worker.conn.poll(timeout)
        except (EOFError, OSError):
            return True  # dead: `_receive` reports it

    def _dispatch(self, command: str, tasks: list[tuple]) -> list[tuple[str, Any] | None]:
        """Send each task (whose first item is a sub-env index) to its worker; gather
        replies in task order. `None` marks a task whose worker died, `overdue` one whose
        worker missed its deadline; that worker is replaced by a fresh one (with freshly
        built sub-envs)."""
        by_worker: dict[int, list[int]] = {}
        for position, task in enumerate(tasks):
            by_worker.setdefault(self._worker_of[task[0]], []).append(position)
        sent: dict[int, list[int]] = {}
        for w, positions in by_worker.items():
            payload = [self._host_payload(command, tasks[p]) for p in positions]
            try:
                self._workers[w].conn.send((command, payload))
            except OSError:  # it died since its last reply (BrokenPipeError, reset)
                self._replace_worker(w)
            else:
                sent[w] = positions
        replies: list[tuple[str, Any] | None] = [None] * len(tasks)
        for w, positions in sent.items():
            if self.step_timeout is not None:
                deadline_s = self.step_timeout * len(positions) + _GRACE_SECONDS
                if not self._answers_within(self._workers[w], deadline_s):
                    self._replace_worker(w)
                    for p in positions:
                        replies[p] = self._overdue(deadline_s)
                    continue
            reply = self._receive(self._workers[w], None)
            if reply is None:
                self._replace_worker(w)
                continue
            for p, item in zip(positions, reply, strict=True):
                replies[p] = item
        return replies

    def _replace_worker(self, w: int) -> None:
        old = self._workers[w]
        logger.warning("worker %d (sub-envs %s) stopped answering; restarting it", w, old.indices)
        old.kill()
        # Its sub-envs lost their episodes: each one's next step reports that (see _run_steps).
        self._lost.update(old.indices)
        self._workers[w] = self._start_worker(old.indices, build=False)
        self._check_started(w, "restarted worker")

    def _check_started(self, w: int, label: str) -> None:
        """Wait (up to `start_timeout`) for worker `w`'s construction report; unless it is
        ok, kill the worker and raise `SubEnvError`."""
        worker = self._workers[w]
        try:
            answered = self.start_timeout is None or worker.conn.poll(self.start_timeout)
            reply = worker.conn.recv() if answered else None
        except (EOFError, OSError):  # it died before it reported
            answered, reply = True, None
        if reply is None:
            reply = [("error", "died" if answered else f"not built within {self.start_timeout}s")]
        ((status, detail),) = reply
        if status != "ok":
            worker.kill()
            raise SubEnvError(worker.indices[0], "construction", f"{label} {w}: {detail}")

    def _close_backend(self) -> None:
        deadline = time.monotonic() + 10.0
        for worker in self._workers:
            with contextlib.suppress(BrokenPipeError, OSError):
                worker.conn.send(("close", None))
        for worker in self._workers:
            self._receive(worker, timeout=max(deadline - time.monotonic(), 0.1))
            worker.process.join(max(deadline - time.monotonic(), 0.1))
            worker.kill()
