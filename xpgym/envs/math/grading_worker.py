r"""The grading worker: checks answers with math-verify, each check under a wall-clock limit.

`xpgym.envs.math.grading.MathGrader` starts it as
``python -m xpgym.envs.math.grading_worker --memory-mb N``. Two processes do the work:

* the *relay* (this process's main loop) imports math-verify once, then forks a *checker*
  child that inherits the warm imports. The relay passes each request to the checker and
  waits for the verdict with the request's deadline (``select``, no signals). If the
  deadline passes, it kills the checker (``SIGKILL``), answers ``{"timeout": true}`` and
  forks a fresh checker, which takes milliseconds instead of the second a new interpreter
  needs to import sympy. The relay itself never runs a comparison, so it cannot hang.
* the *checker* runs `equivalent` with math-verify's timeouts switched off
  (``parsing_timeout=None``, ``timeout_seconds=None``): they use ``signal.alarm``, which works
  only in a main thread and would fight any other alarm user.

Protocol with the grader, one JSON object per line (UTF-8):

* on start the relay writes ``{"ready": true}``, or ``{"fatal": "<message>"}`` and exits
  (math-verify missing, say);
* each request on stdin is ``{"answer": str, "golds": [str, ...], "timeout_s": float}``; the
  reply on stdout is ``{"correct": bool}``, ``{"timeout": true}`` or
  ``{"error": "<message>"}``.

The relay exits at EOF on stdin (its parent is gone), killing the checker. The grader
starts it in a session of its own so that it can kill both with one ``killpg``. The address
space of both is capped at ``--memory-mb`` MiB (``RLIMIT_AS``), so an answer whose value has
billions of digits fails with `MemoryError` instead of eating the host's memory. Anything a
library prints goes to stderr: the replies use a private copy of stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import select
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from xpgym.core.optional import import_optional

__all__ = ["equivalent", "main"]


def equivalent(answer: str, golds: Sequence[str]) -> bool:
    r"""Whether `answer` equals one of `golds` according to math-verify (no timeout here).

    Both sides are parsed as the content of a ``\boxed{}`` (LaTeX first, then plain
    expressions such as ``1/2``) and compared by math-verify's `verify`: numbers and
    expressions by value (floats rounded to 6 decimals), sets, intervals, equations
    (``x = 3`` matches ``3``), matrices, and as a last resort strings.
    """
    math_verify = _math_verify()
    parsed_answer = math_verify.parse(f"\\boxed{{{answer}}}", parsing_timeout=None)
    if not parsed_answer:
        return False
    for gold in golds:
        parsed_gold = math_verify.parse(f"\\boxed{{{gold}}}", parsing_timeout=None)
        if parsed_gold and math_verify.verify(parsed_gold, parsed_answer, timeout_seconds=None):
            return True
    return False


def _math_verify() -> Any:
    return import_optional(
        "math_verify", needed_by="math answer grading", install='pip install "xpgym[envs]"'
    )


def _write_line(fd: int, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode() + b"\n"
    while data:
        data = data[os.write(fd, data) :]


class _Checker:
    """A forked child that answers requests on a pipe with `equivalent`'s verdicts."""

    def __init__(self) -> None:
        request_r, self._request_w = os.pipe()
        self._reply_r, reply_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: serve, never return
            os.close(self._request_w)
            os.close(self._reply_r)
            code = 0
            try:
                _serve(request_r, reply_w)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(request_r)
        os.close(reply_w)
        self._buffer = b""

    def check(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The checker's reply to `request`, ``{"timeout": true}`` or ``{"error": ...}``."""
        deadline = time.monotonic() + timeout_s
        try:
            _write_line(self._request_w, request)
        except OSError:
            return self._died()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._reply_r], [], [], remaining)[0]:
                return {"timeout": True}
            chunk = os.read(self._reply_r, 1 << 16)
            if not chunk:
                return self._died()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def _died(self) -> dict[str, Any]:
        _, status = os.waitpid(self.pid, 0)
        self.pid = -1
        return {"error": f"the checker process died ({_describe_status(status)})"}

    def kill(self) -> None:
        if self.pid > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = -1
        for fd in (self._request_w, self._reply_r):
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def alive(self) -> bool:
        return self.pid > 0


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by signal {os.WTERMSIG(status)}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"


def _serve(request_fd: int, reply_fd: int) -> None:
    """The checker's loop: one verdict per request line, until EOF."""
    with os.fdopen(request_fd, "rb") as requests:
        for line in requests:
            try:
                request = json.loads(line)
                answer, golds = str(request["answer"]), [str(g) for g in request["golds"]]
                reply: dict[str, Any] = {"correct": equivalent(answer, golds)}
            except Exception as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"[:1000]}
            _write_line(reply_fd, reply)


def main(argv: Sequence[str] | None = None) -> None:
    """Relay grading requests from stdin to a checker until EOF (see the module docstring)."""
    parser = argparse.ArgumentParser(description="xpgym math grading worker")
    parser.add_argument("--memory-mb", type=int, default=0, help="address-space cap; 0: none")
    args = parser.parse_args(argv)
    replies = _private_stdout()
    if args.memory_mb > 0:
        import resource

        limit = args.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        _math_verify()
    except ImportError as exc:
        _write_line(replies, {"fatal": str(exc)})
        return
    # Timeouts are the relay's job; math-verify would warn once that its own are off.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    equivalent("0", ["0"])  # warm the parsers up once, before forking checkers
    checker = _Checker()
    _write_line(replies, {"ready": True})
    try:
        for line in sys.stdin.buffer:
            request = json.loads(line)
            timeout_s = float(request.pop("timeout_s"))
            reply = checker.check(request, timeout_s)
            if "correct" not in reply:  # timed out, died, or failed: start over clean
                checker.kill()
            _write_line(replies, reply)
            if not checker.alive:
                checker = _Checker()
    finally:
        checker.kill()


def _private_stdout() -> int:
    """A copy of stdout's fd, for replies; fd 1 and `sys.stdout` then point at stderr."""
    replies = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return replies


if __name__ == "__main__":
    main()
