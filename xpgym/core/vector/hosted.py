"""What the backends whose sub-envs live elsewhere share (worker processes, Ray actors).

Two halves:

* `SubEnvHost` lives where the sub-envs live (a worker process, a Ray actor). It holds
  several `SubEnv`s and runs one batch of tasks per call, answering every task with
  ``("ok", result)`` or ``("error", text)``, in task order. Its sub-envs step concurrently
  on a `WorkSharingPool` of `threads` threads (``pool.py``): cheap steps run one after
  another in the host's main thread, steps that block (I/O, a sandbox, a sleep) wait all at
  once. With ``threads=1`` they run one after another in the main thread.
* Timeouts (``step_timeout``): with one thread, a step or reset that overruns is
  interrupted by a ``SIGALRM`` timer (in the host's main thread), reported as truncated
  with ``info["error"]``, and only that sub-env is rebuilt. With several threads the host's
  main thread watches the clock instead, as `ThreadVectorEnv` does: an overrunning step is
  reported the same way, its sub-env rebuilt, and the thread stuck in it abandoned (a
  thread cannot be interrupted); a host that stops answering altogether is replaced by the
  parent, whatever the threads.
* `HostedVectorEnv` is the parent's side: it turns the hosts' replies into the `VectorEnv`
  hooks. A backend implements `_dispatch` (send tasks to their hosts, return one reply per
  task: `None` for a task whose host died, `overdue` for one whose host missed its deadline;
  either host is replaced). Sub-envs of a replaced host lost their episodes: the ones in the
  batch are reported as truncated with ``info["error"]`` right away (a ``TimeoutError``, so
  ``"sub_env_timeout"``, for a host that missed its deadline; else ``"sub_env_crash"``), the
  others at their next step, and the step after that resets them (a reset clears the loss).
"""

from __future__ import annotations

import functools
import signal
import threading
from collections.abc import Callable
from typing import Any

from xpgym.core.env import Env
from xpgym.core.vector.base import (
    StepResult,
    StepTask,
    SubEnv,
    SubEnvError,
    VectorEnv,
    error_info,
    step_ended_episode,
)
from xpgym.core.vector.pool import TIMED_OUT, Failed, WorkSharingPool

__all__ = ["HostedVectorEnv", "Reply", "SubEnvHost"]

Reply = tuple[str, Any]
"""``("ok", result)`` or ``("error", text)``: a host's answer to one task; or, from the
parent's `HostedVectorEnv._overdue`, ``("overdue", text)``: its host missed its deadline."""


class _StepTimeoutError(TimeoutError):
    """Raised inside a host by SIGALRM when a sub-env overruns `step_timeout`."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise _StepTimeoutError("step_timeout exceeded")


class SubEnvHost:
    """Hosts the sub-envs ``env_fns`` (index -> factory) and runs batches of tasks on them.

    Tasks: ``step``: ``(index, action)`` (action `None`: reset in place of a step, see
    `SubEnv.step`); ``step_reset``: ``(index, action)``, the step and then, if it (not a
    reset in place of one) ended the episode, a reset, answered with ``(step result, reset
    result or None)`` (SAME_STEP without a `step_timeout`: the parent sends it only then);
    ``reset``: ``(index, seed, options)``; ``call`` / ``get_attr`` / ``set_attr``:
    ``(index, args)``. With `build` false the sub-envs are built at their first reset (a
    replacement host). `threads`: how many of its tasks may run at once (see the module
    docstring); at least 1.
    """

    def __init__(
        self,
        env_fns: dict[int, Callable[[], Env]],
        step_timeout: float | None,
        build: bool,
        threads: int = 1,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.step_timeout = step_timeout
        self.pool: WorkSharingPool | None = None
        if threads > 1:
            self.pool = WorkSharingPool(threads, name="xpgym-host")
        elif step_timeout is not None:
            # SIGALRM handlers run only in the main thread; elsewhere only the parent's
            # deadline applies.
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGALRM, _on_alarm)
            else:
                self.step_timeout = None
        self.subenvs: dict[int, SubEnv] = {}
        try:
            for i, fn in env_fns.items():
                self.subenvs[i] = SubEnv(fn, build=build)
        except BaseException:
            for built in self.subenvs.values():  # closed, not left to the process's exit
                built.discard()
            if self.pool is not None:
                self.pool.close()
            raise

    def _timed(self, fn: Callable[[], Any]) -> Any:
        if self.step_timeout is None or self.pool is not None:
            return fn()
        signal.setitimer(signal.ITIMER_REAL, self.step_timeout)
        try:
            return fn()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _overran(self, i: int) -> TimeoutError:
        return TimeoutError(f"sub-env {i} step took over {self.step_timeout}s")

    def _step(self, i: int, action: str | None) -> StepResult:
        sub = self.subenvs[i]
        try:
            return self._timed(functools.partial(sub.step, action))
        except _StepTimeoutError:  # raised in the env's step, or between its lines
            return sub.failed(self._overran(i))

    def _task(self, command: str, task: tuple) -> Any:
        """Run one task; raises what the sub-env raised (but a step never raises)."""
        if command == "step":
            return self._step(*task)
        if command == "step_reset":
            i, action = task
            result = self._step(i, action)
            return result, self._step(i, None) if step_ended_episode(action, result) else None
        if command == "reset":
            i, seed, options = task
            return self._timed(functools.partial(self.subenvs[i].reset, seed, options))
        i, args = task
        return getattr(self.subenvs[i], command)(*args)

    def run(self, command: str, payload: list[tuple]) -> list[Reply]:
        """Run one batch; one reply per task, in order. Never raises for a task."""
        if self.pool is None:
            replies: list[Reply] = []
            for task in payload:
                try:
                    replies.append(("ok", self._task(command, task)))
                except BaseException as exc:
                    replies.append(("error", repr(exc)))
            return replies
        results = self.pool.run(
            lambda j: self._task(command, payload[j]), len(payload), self.step_timeout, command
        )
        return [
            self._reply(command, task, result)
            for task, result in zip(payload, results, strict=True)
        ]

    def _reply(self, command: str, task: tuple, result: Any) -> Reply:
        """A pooled task's reply; a task that overran gives its sub-env up to its thread."""
        if isinstance(result, Failed):
            return ("error", repr(result.exc))
        if result is not TIMED_OUT:
            return ("ok", result)
        i = task[0]
        stuck = self.subenvs[i]
        self.subenvs[i] = stuck.abandoned()
        if command != "step":
            return ("error", f"{command} timed out after {self.step_timeout}s")
        return ("ok", (stuck.last_obs, 0.0, False, True, error_info(self._overran(i))))

    def close(self) -> None:
        """Close every sub-env and stop the threads."""
        try:
            if self.pool is None:
                for sub in self.subenvs.values():
                    sub.discard()
            else:
                subs = list(self.subenvs.values())
                self.pool.run(lambda j: subs[j].discard(), len(subs), self.step_timeout, "close")
        finally:
            if self.pool is not None:
                self.pool.close()


class HostedVectorEnv(VectorEnv):
    """Parent side of a backend whose sub-envs live in hosts; see the module docstring.

    Subclasses set `host_kind` (for messages) and implement `_dispatch` and
    `_close_backend`; a host they replace adds its sub-envs to ``self._lost``.
    """

    host_kind = "host"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lost: set[int] = set()  # sub-envs whose host was replaced mid-episode

    def _dispatch(self, command: str, tasks: list[tuple]) -> list[Reply | None]:
        """Send each task (its first item is a sub-env index) to its host; replies in task
        order: `None` for a task whose host died, `overdue` for one whose host did not answer
        within its deadline (either host was replaced)."""
        raise NotImplementedError

    def _host_threads(self, name: str, given: int | None, most_hosted: int) -> int:
        """The threads per host: `given`, else `most_hosted` (every sub-env of the fullest
        host may wait at once), or 1 with a `step_timeout` (an overrunning step is then
        interrupted by SIGALRM, not abandoned to its thread).

        Raises:
            ValueError: `given` is not a positive int.
        """
        if given is None:
            return 1 if self.step_timeout is not None else max(most_hosted, 1)
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise ValueError(f"{name} must be a positive int, got {given!r}")
        return given

    @staticmethod
    def _host_payload(command: str, task: tuple) -> tuple:
        """A task as `SubEnvHost.run` takes it."""
        return task if command in ("step", "step_reset", "reset") else (task[0], task[1:])

    def _overdue(self, deadline_s: float) -> Reply:
        """The reply `_dispatch` gives for a task whose host missed its deadline."""
        return ("overdue", f"its {self.host_kind} died or hung (no answer in {deadline_s:g} s)")

    def _failure(self, reply: Reply | None) -> str:
        return f"its {self.host_kind} died or hung" if reply is None else reply[1]

    def _run_resets(self, tasks):
        replies = self._dispatch("reset", tasks)
        results = []
        for (i, _, _), reply in zip(tasks, replies, strict=True):
            if reply is None or reply[0] != "ok":
                raise SubEnvError(i, "reset", self._failure(reply))
            self._lost.discard(i)  # a fresh episode: nothing left to report
            results.append(reply[1])
        return results

    def _run_steps(self, tasks: list[StepTask]) -> list[StepResult]:
        return [value for _, value in self._step_on_hosts("step", tasks)]

    def _run_steps_and_resets(
        self, tasks: list[StepTask]
    ) -> tuple[list[StepResult], dict[int, StepResult]]:
        # One round trip: each host resets the sub-envs whose step ended right after the
        # step. With a `step_timeout` the step and the reset keep a deadline each, so they
        # stay two round trips (the base class's way).
        if self.step_timeout is not None:
            return super()._run_steps_and_resets(tasks)
        results: list[StepResult] = []
        resets: dict[int, StepResult] = {}
        for j, (answered, value) in enumerate(self._step_on_hosts("step_reset", tasks)):
            result, reset = value if answered else (value, None)
            results.append(result)
            if reset is not None:
                resets[j] = reset
        # A step whose host failed was reported without a reset: reset it now.
        return self._reset_ended(tasks, results, resets)

    def _step_on_hosts(self, command: str, tasks: list[StepTask]) -> list[tuple[bool, Any]]:
        """Run `command` (``step`` or ``step_reset``) for each task on its host. One item per
        task: ``(True, the host's answer)``, or ``(False, truncated step result)`` for a task
        whose host failed, or that was not run because its host had been replaced (see the
        module docstring)."""
        # A sub-env whose host was replaced lost its episode: report that as a truncation
        # instead of stepping a fresh env that was never reset (a reset runs as usual).
        lost = {i for i, action in tasks if i in self._lost and action is not None}
        self._lost.difference_update(i for i, _ in tasks)
        live = [task for task in tasks if task[0] not in lost]
        replies = dict(zip((t[0] for t in live), self._dispatch(command, live), strict=True))
        outcomes: list[tuple[bool, Any]] = []
        for i, _ in tasks:
            reply = replies.get(i)
            if reply is None or reply[0] != "ok":
                failed = (
                    TimeoutError if reply is not None and reply[0] == "overdue" else RuntimeError
                )
                info = error_info(failed(f"sub-env {i}: {self._failure(reply)}"))
                outcomes.append((False, (self._observations[i], 0.0, False, True, info)))
            else:
                outcomes.append((True, reply[1]))
        return outcomes

    def _run_calls(self, indices: list[int], method: str, *args: Any) -> list[Any]:
        replies = self._dispatch(method, [(i, *args) for i in indices])
        results = []
        for i, reply in zip(indices, replies, strict=True):
            if reply is None or reply[0] != "ok":
                raise SubEnvError(i, f"{method}{args[:1]}", self._failure(reply))
            results.append(reply[1])
        return results
