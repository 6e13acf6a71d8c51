"""Transactions (CodeGym's trial-then-overwrite): one tool call of a toolgym env, run so that
a call that raises, or runs past its time limit, leaves the env's ``state`` exactly as it was
and its error is the observation. Two modes (`ISOLATION_MODES`, the env's ``isolation=``):

* ``"inline"`` (`run_inline`, the default): the call runs in this thread on the live state;
  the snapshot is a ``copy.deepcopy`` taken before it (cost: one deep copy of the state per
  call). On an exception the snapshot is put back. A timed-out call cannot be interrupted
  (Python threads cannot be killed): it runs to the end, then its effect is discarded as if
  it had raised. So inline mode keeps the state correct but does not bound a step's latency,
  unless the tool cooperates: a tool with a long loop calls ``self.check_deadline()``
  (`CallDeadline.check`), which raises once the call is past its limit (the call is then
  rolled back and reported as timed out). A ``KeyboardInterrupt`` or ``SystemExit`` inside a
  tool is rolled back, then propagated.
* ``"process"`` (`run_in_process`): the call runs in a forked child process on its copy of
  the env; the child sends back the output and the new state (pickled), and the parent
  commits them. At the time limit the child is killed and nothing changes, so a step takes
  at most about the time limit. Cost: a fork plus pickling the state each call
  (milliseconds); needs the ``fork`` start method (Linux, macOS), and a tool must not rely on
  anything but the state (changes elsewhere are lost with the child). Give it a time limit:
  without one a hung child is waited for forever (a child forked from a multi-threaded
  process can hang on a lock another thread held at the fork).

Both return ``(output, None)`` after a call that committed, or ``(None, error)`` after one
that was rolled back; the error is the observation text without its ``Error: `` prefix.
"""

from __future__ import annotations

import copy
import multiprocessing
import time
from collections.abc import Callable
from typing import Any, Protocol

from xpgym.core.tools.decorator import ToolError

__all__ = [
    "ISOLATION_MODES",
    "CallDeadline",
    "DeadlineExceededError",
    "StatefulEnv",
    "run_in_process",
    "run_inline",
]

ISOLATION_MODES = ("inline", "process")


class DeadlineExceededError(ToolError):
    """Raised by `CallDeadline.check` when the running call is past its time limit."""


class StatefulEnv(Protocol):
    """What a transaction snapshots and restores: the env's working state, and nothing else."""

    state: dict[str, Any]


class CallDeadline:
    """The time limit of the tool call that runs now (none between calls or without a limit).

    It travels with the env into a forked child, where the tool's `check` reads it.
    """

    def __init__(self) -> None:
        self._at: float | None = None
        self._timeout_s: float | None = None

    def start(self, timeout_s: float | None) -> None:
        """A call starts: it may run `timeout_s` seconds from now (`None`: no limit)."""
        self._timeout_s = timeout_s
        self._at = None if timeout_s is None else time.monotonic() + timeout_s

    def stop(self) -> bool:
        """The call is over (or, in process mode, handed to its child): whether it ran past
        its limit."""
        at, self._at = self._at, None
        return at is not None and time.monotonic() > at

    def check(self) -> None:
        """Raise `DeadlineExceededError` once the running call is past its limit; nothing
        without a limit or outside a call."""
        if self._at is not None and time.monotonic() > self._at:
            raise DeadlineExceededError(f"past the time limit of {self._timeout_s:g} s")


def run_inline(
    env: StatefulEnv,
    tool: str,
    invoke: Callable[[], Any],
    *,
    deadline: CallDeadline,
    timeout_s: float | None,
    check_output: Callable[[Any], str],
) -> tuple[str | None, str | None]:
    """Run `invoke` (the call of `tool`) in this thread on the live ``env.state``; put the
    snapshot back if it raises or ran past `timeout_s` (see the module docstring).

    Raises:
        KeyboardInterrupt, SystemExit: from the tool, after the rollback.
        TypeError: from `check_output` (the tool returned a non-string: an env bug).
    """
    snapshot = copy.deepcopy(env.state)
    deadline.start(timeout_s)
    try:
        output = invoke()
    except BaseException as exc:  # any tool failure is the agent's observation
        env.state = snapshot
        if not isinstance(exc, Exception):
            raise  # KeyboardInterrupt, SystemExit: rolled back, then propagated
        return None, _failure(tool, exc, timeout_s)
    finally:
        late = deadline.stop()
    if late:
        env.state = snapshot
        return None, _timed_out(tool, timeout_s)
    return check_output(output), None


def run_in_process(
    env: StatefulEnv,
    tool: str,
    invoke: Callable[[], Any],
    *,
    deadline: CallDeadline,
    timeout_s: float | None,
    check_output: Callable[[Any], str],
) -> tuple[str | None, str | None]:
    """Run `invoke` (a bound method of `env`, the call of `tool`) in a forked child on its
    copy of `env`; commit the child's state, or kill it at `timeout_s` (see the module
    docstring).

    Raises:
        TypeError: from `check_output` (the tool returned a non-string: an env bug); the
            state is not committed.
    """
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    deadline.start(timeout_s)  # the child's copy checks it in check_deadline()
    child = context.Process(target=_run_in_child, args=(env, tool, invoke, timeout_s, sender))
    try:
        child.start()
    finally:
        deadline.stop()
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            child.kill()
            return None, _timed_out(tool, timeout_s)
        try:
            ok, output, state = receiver.recv()
        except EOFError:
            return None, f"{tool} failed: the call's process died without an answer"
    finally:
        receiver.close()
        child.join()
    if not ok:
        return None, output
    output = check_output(output)
    env.state = state
    return output, None


def _run_in_child(
    env: StatefulEnv, tool: str, invoke: Callable[[], Any], timeout_s: float | None, conn: Any
) -> None:
    """Body of the process-isolated call: run the tool on the child's copy, send back."""
    try:
        output = invoke()
        conn.send((True, output, env.state))
    except BaseException as exc:  # report anything; the parent rolls back
        conn.send((False, _failure(tool, exc, timeout_s), None))
    finally:
        conn.close()


def _failure(tool: str, exc: BaseException, timeout_s: float | None) -> str:
    """A failed call's error text: `ToolError`'s message alone, else the type too."""
    if isinstance(exc, DeadlineExceededError):
        return _timed_out(tool, timeout_s)
    reason = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
    return f"{tool} failed: {reason}"


def _timed_out(tool: str, timeout_s: float | None) -> str:
    return f"{tool} exceeded its time limit of {timeout_s:g} s"
