r"""Grade a model's final answer against gold answers with math-verify, under a wall-clock limit.

`grade_answer(action, golds)` takes the content of the last ``\boxed{...}`` of `action` (the
rule is in `xpgym.envs.common.answers`) and asks math-verify whether it equals one of `golds`
(see `xpgym.envs.math.grading_worker.equivalent` for what counts as equal: ``0.5``,
``\frac{1}{2}``, ``1/2`` and ``\dfrac12`` are all one answer). It returns a `GradeResult`
(`xpgym.envs.common.answer_env`) whose `status` says how the grading went:

===============  ============================================================  ===========
``status``       meaning                                                       `correct`
===============  ============================================================  ===========
``"graded"``     math-verify compared the answer with the gold answers         its verdict
``"no_answer"``  the action has no closed ``\boxed{}``; nothing was compared   `False`
``"timeout"``    the comparison ran past the time limit and was killed         `False`
``"error"``      the worker failed (crashed, or an error escaped math-verify)  `False`
===============  ============================================================  ===========

Why a worker process: math-verify's own timeout uses ``signal.alarm``, which works only in
the main thread (it raises in a thread pool) and replaces any alarm the host set. Here the
comparison runs in a persistent worker process (`xpgym.envs.math.grading_worker`) with
math-verify's timeouts off. The worker enforces each request's deadline without signals:
it kills the forked child that ran the comparison when it overruns (sympy can spend
minutes on ``9^{9^{9^{9}}}``) and forks a warm replacement in milliseconds. The grader keeps
a backstop deadline of its own (the limit plus `_GRACE_S`) and kills the whole worker if
even the reply is late. The worker's memory is capped too (``RLIMIT_AS``).

`MathGrader` is safe to share between threads: each request takes an idle worker, and up to
`max_workers` workers run at once (started on demand; callers beyond that wait their turn,
and waiting does not count against the time limit). It is safe across processes: a forked
child never touches its parent's workers and starts its own. Workers are started with
``subprocess`` (not `multiprocessing`), so scripts need no ``if __name__ == "__main__"``
guard. `default_grader()` is the process-wide instance every math env uses.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xpgym.envs.common.answer_env import GRADE_STATUSES, GradeResult
from xpgym.envs.common.answers import last_boxed

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "GRADE_STATUSES",  # defined with GradeResult in xpgym.envs.common.answer_env
    "GradeResult",
    "GradingWorkerError",
    "MathGrader",
    "default_grader",
    "grade_answer",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0
_GRACE_S = 10.0  # how much later than the limit the worker's own reply may come
_WORKER_MODULE = "xpgym.envs.math.grading_worker"
_XPGYM_ROOT = str(Path(__file__).resolve().parents[3])  # the directory holding `xpgym/`


class GradingWorkerError(RuntimeError):
    """A grading worker could not be started (other than math-verify missing)."""


class _ProtocolError(Exception):
    """A worker wrote something that is not a reply."""


class _Worker:
    """One worker process and the reading end of its replies."""

    def __init__(self, memory_limit_mb: int, startup_timeout_s: float) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_XPGYM_ROOT, env.get("PYTHONPATH", "")) if p
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", _WORKER_MODULE, "--memory-mb", str(memory_limit_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: one killpg stops it and its child
        )
        self._buffer = b""
        try:
            hello = self._read(time.monotonic() + startup_timeout_s)
        except _ProtocolError as exc:
            self.kill()
            raise GradingWorkerError(str(exc)) from None
        except BaseException:
            self.kill()
            raise
        if hello is None:
            self.kill()
            raise GradingWorkerError(
                f"the grading worker ({sys.executable} -m {_WORKER_MODULE}) did not start "
                f"within {startup_timeout_s:g} s (exit code {self.proc.returncode})"
            )
        if "fatal" in hello:
            self.kill()
            raise ImportError(hello["fatal"])

    def request(self, payload: dict[str, Any], deadline: float) -> dict[str, Any] | None:
        """Send `payload`; the reply, or `None` if none came by `deadline` or the worker died."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(payload).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:  # the worker is gone (BrokenPipeError)
            return None
        return self._read(deadline)

    def _read(self, deadline: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # EOF: the worker died
                self.proc.wait()
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            return json.loads(line)
        except ValueError:
            raise _ProtocolError(f"the grading worker wrote {line[:120]!r}") from None

    def kill(self) -> None:
        """Stop the worker and its checker child (which may outlive a worker killed alone)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # stdin may hold an unsent request
                    stream.close()


class MathGrader:
    r"""Grades answers with math-verify in worker processes, each call under a time limit.

    Args:
        timeout_s: Default wall-clock limit of one `grade` call, in seconds (the comparison
            only: neither starting a worker nor waiting for a free one counts).
        max_workers: Most workers alive at once (each is two processes sharing about
            60 MiB).
        memory_limit_mb: Address-space cap of each worker, in MiB; 0 for none.
        startup_timeout_s: How long a new worker may take to import math-verify.

    Raises:
        ValueError: a non-positive limit or worker count.
    """

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_workers: int = 4,
        memory_limit_mb: int = 2048,
        startup_timeout_s: float = 60.0,
    ) -> None:
        if not timeout_s > 0 or not startup_timeout_s > 0:
            raise ValueError(
                f"timeouts must be positive, got timeout_s={timeout_s!r}, "
                f"startup_timeout_s={startup_timeout_s!r}"
            )
        if max_workers < 1 or memory_limit_mb < 0:
            raise ValueError(
                f"max_workers must be >= 1 and memory_limit_mb >= 0, got {max_workers}, "
                f"{memory_limit_mb}"
            )
        self.timeout_s = float(timeout_s)
        self.max_workers = int(max_workers)
        self.memory_limit_mb = int(memory_limit_mb)
        self.startup_timeout_s = float(startup_timeout_s)
        self._closed = False
        self._after_fork()
        _graders.add(self)

    def _after_fork(self) -> None:
        """Start with no workers: in a forked child, the inherited ones are the parent's."""
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._alive = 0  # workers started or starting, idle or busy

    def grade(
        self, action: str, golds: str | Sequence[str], *, timeout_s: float | None = None
    ) -> GradeResult:
        r"""Grade the last ``\boxed{}`` of `action` against `golds` (any one may match).

        Args:
            action: The model's reply.
            golds: One gold answer or several, as text (LaTeX or plain).
            timeout_s: This call's limit; default `timeout_s` of the grader.

        Raises:
            ValueError: `timeout_s` is not positive.
            ImportError: math-verify is not installed (``pip install "xpgym[envs]"``).
            GradingWorkerError: a worker could not be started.
            RuntimeError: the grader is closed.
        """
        limit = self.timeout_s if timeout_s is None else float(timeout_s)
        if not limit > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        answer = last_boxed(action)
        if answer is None:
            return GradeResult(False, "no_answer", None)
        gold_list = [golds] if isinstance(golds, str) else [str(g) for g in golds]
        worker = self._acquire()
        keep = False
        try:
            request = {"answer": answer, "golds": gold_list, "timeout_s": limit}
            try:
                reply = worker.request(request, time.monotonic() + limit + _GRACE_S)
            except _ProtocolError as exc:
                logger.warning("%s; killed it", exc)
                return GradeResult(False, "error", answer, str(exc))
            if reply is None:
                alive = worker.proc.poll() is None
                what = "did not reply in time" if alive else f"died ({worker.proc.returncode})"
                logger.warning("a grading worker %s; killed it", what)
                return GradeResult(False, "error", answer, f"the grading worker {what}")
            keep = True
            if reply.get("timeout"):
                logger.warning("grading %r took over %g s; stopped it", answer[:80], limit)
                return GradeResult(False, "timeout", answer, f"no verdict within {limit:g} s")
            if "error" in reply:
                return GradeResult(False, "error", answer, str(reply["error"]))
            return GradeResult(bool(reply["correct"]), "graded", answer)
        finally:
            self._release(worker, keep=keep)

    def _acquire(self) -> _Worker:
        with self._cond:
            self._check_open()
            while not self._idle and self._alive >= self.max_workers:
                self._cond.wait()
                self._check_open()
            while self._idle:
                worker = self._idle.pop()
                if worker.proc.poll() is None:
                    return worker
                worker.kill()  # died while idle (killed from outside): reap it, replace it
                self._alive -= 1
            self._alive += 1
        try:  # start outside the lock: it takes a second
            return _Worker(self.memory_limit_mb, self.startup_timeout_s)
        except BaseException:
            with self._cond:
                self._alive -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker, *, keep: bool) -> None:
        with self._cond:
            if keep and not self._closed and worker.proc.poll() is None:
                self._idle.append(worker)
            else:
                worker.kill()
                self._alive -= 1
            self._cond.notify()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this MathGrader is closed")

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._closed

    def close(self) -> None:
        """Stop the idle workers (busy ones stop when their call returns). Idempotent."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._alive -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.kill()

    def __repr__(self) -> str:
        return (
            f"MathGrader(timeout_s={self.timeout_s:g}, max_workers={self.max_workers}, "
            f"workers_alive={self._alive})"
        )


_graders: weakref.WeakSet[MathGrader] = weakref.WeakSet()
_default: MathGrader | None = None
_default_lock = threading.Lock()


def default_grader() -> MathGrader:
    """The process-wide `MathGrader` (default settings), created on first use."""
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = MathGrader()
        return _default


def grade_answer(
    action: str, golds: str | Sequence[str], *, timeout_s: float | None = None
) -> GradeResult:
    """`MathGrader.grade` on `default_grader()`; `timeout_s` defaults to `DEFAULT_TIMEOUT_S`."""
    return default_grader().grade(action, golds, timeout_s=timeout_s)


def _reset_after_fork() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    for grader in list(_graders):
        grader._after_fork()


def _close_default() -> None:
    if _default is not None:
        _default.close()


os.register_at_fork(after_in_child=_reset_after_fork)
atexit.register(_close_default)
