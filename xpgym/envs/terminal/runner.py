"""The program that runs inside the sandbox for each terminal command and each task check.

Standard library only: `xpgym.envs.terminal.workspace` passes this file's source to
`Sandbox.run_python`, so it runs as ``__main__`` in a fresh sandbox call whose working
directory (``/tmp``, also ``$HOME``) is an empty private tmpfs. It is trusted code; what it
starts is not. Never import it on the host: it edits ``sys.path`` when loaded.

Protocol. Standard input: one JSON line, the request, then the workspace as a gzipped tar
(possibly empty: no files yet). The request holds ``mode`` (``"command"`` or ``"check"``),
``command`` (the shell command, or the check's Python source), ``timeout_s``,
``head_bytes`` and ``tail_bytes`` (how much of each output stream to keep from its start
and its end), ``flood_bytes`` (a command writing more to one stream is stopped) and
``max_archive_bytes``. Standard output: one JSON line, the reply: ``exit_code`` (`None` if
unknown), ``timed_out``, ``flooded``, ``stdout`` and ``stderr`` (each ``{"head", "tail",
"cut"}``: the kept text and how many bytes between them were dropped) and, in command
mode, ``workspace`` (the workspace afterwards, a base64 gzipped tar, or `None`) and
``workspace_error`` (why it is `None`).

Steps:

1. Drop the working directory from ``sys.path`` and import everything first, so that files
   in the workspace can never shadow a module this program uses; mark the process
   non-dumpable, so that the command cannot read its memory or open its file descriptors
   through ``/proc``.
2. Unpack the workspace into the working directory (modes, symlinks and times kept).
3. Command mode: run ``bash -c <command>`` in the working directory, stdin ``/dev/null``,
   capturing both streams. When the command exits, or the time limit passes, or a stream
   floods, every other process of the call is killed (``kill(-1)``): nothing started by a
   command outlives it. Check mode: run the check's source in this process, in a fresh
   ``__main__`` namespace, with its output captured and a timer (``SIGALRM``) for the time
   limit; step 1 means nothing in the workspace is importable by it, as with
   ``python -I``. The check's exit status is what ``python -c`` would give (``sys.exit(x)``
   and uncaught exceptions included).
4. In command mode, pack the working directory again (unreadable files and directories are
   read by restoring the owner's permission first, their recorded modes are unchanged;
   sockets and device files are skipped) and reply.
"""

from __future__ import annotations

import sys

sys.path[:] = [entry for entry in sys.path if entry not in ("", ".", "/tmp")]

import base64  # noqa: E402 - imported after the path is cleaned, on purpose
import contextlib  # noqa: E402
import ctypes  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import selectors  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import subprocess  # noqa: E402
import tarfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

_GRACE_S = 2.0  # after killing everything, how long to wait for the pipes to close
_POLL_S = 0.05
_PR_SET_DUMPABLE = 4


class _Capture:
    """Keeps the first `head` and the last `tail` bytes of a stream, and counts them all."""

    def __init__(self, head: int, tail: int) -> None:
        self.head_size, self.tail_size = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_size - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_size:
            self.tail += chunk
            del self.tail[: -self.tail_size]

    def reply(self) -> dict:
        return {
            "head": self.head.decode("utf-8", "replace"),
            "tail": self.tail.decode("utf-8", "replace"),
            "cut": self.total - len(self.head) - len(self.tail),
        }


def _kill_everything_else() -> None:
    """SIGKILL every process of the call except this one and the call's init."""
    with contextlib.suppress(ProcessLookupError):  # nothing left to kill
        os.kill(-1, signal.SIGKILL)


def _unpack(archive: bytes) -> None:
    if not archive:
        return
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        if hasattr(tarfile, "fully_trusted_filter"):  # Python >= 3.10.12 / 3.11.4
            tar.extractall(".", filter="fully_trusted")  # keep modes as they were
        else:  # pragma: no cover - older patch releases
            tar.extractall(".")


def _run(argv: list[str], timeout_s: float, head: int, tail: int, flood: int) -> dict:
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except (OSError, ValueError) as exc:  # e.g. a NUL character in the command
        error = _Capture(head, tail)
        error.add(f"cannot run the command: {exc}\n".encode())
        return {
            "exit_code": 127,
            "timed_out": False,
            "flooded": False,
            "stdout": _Capture(head, tail).reply(),
            "stderr": error.reply(),
        }
    assert proc.stdout is not None  # both streams are PIPEs
    assert proc.stderr is not None
    stdout, stderr = _Capture(head, tail), _Capture(head, tail)
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, stdout)
    selector.register(proc.stderr, selectors.EVENT_READ, stderr)
    deadline = time.monotonic() + timeout_s
    status = None
    stopped = False
    timed_out = flooded = False
    while True:
        if status is None:
            status = proc.poll()
            if status is not None:
                _kill_everything_else()  # background processes end with their command
        if status is not None and not selector.get_map():
            break
        now = time.monotonic()
        if not stopped and now >= deadline:
            timed_out = stopped = True
            deadline = now + _GRACE_S
        elif stopped and now >= deadline:
            break  # pipes still open after the grace period: give up on them
        if stopped:
            _kill_everything_else()  # again, in case something forked meanwhile
        if not selector.get_map():
            time.sleep(min(_POLL_S, max(0.0, deadline - now)))
            continue
        for key, _ in selector.select(timeout=min(_POLL_S, max(0.0, deadline - now))):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            capture: _Capture = key.data
            capture.add(chunk)
            if capture.total > flood and not stopped:
                flooded = stopped = True
                deadline = time.monotonic() + _GRACE_S
    if status is None:
        proc.kill()
        status = proc.wait()
    return {
        "exit_code": status,
        "timed_out": timed_out,
        "flooded": flooded,
        "stdout": stdout.reply(),
        "stderr": stderr.reply(),
    }


class _CheckTimeoutError(BaseException):
    """Raised in a check by the timer: a `BaseException`, so the check cannot catch it with
    ``except Exception``."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _CheckTimeoutError


def _exit_status(code: object) -> int:
    """The exit status ``python -c`` gives for ``sys.exit(code)`` (it prints other values)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    sys.stderr.write(f"{code}\n")
    return 1


def _check(source: str, timeout_s: float, head: int, tail: int) -> dict:
    stdout, stderr = io.StringIO(), io.StringIO()
    timed_out = False
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                exec(compile(source, "<check>", "exec"), {"__name__": "__main__"})
                status = 0
            except SystemExit as exc:
                status = _exit_status(exc.code)
            except _CheckTimeoutError:
                raise
            except BaseException:  # the check failed: report it as python -c would
                traceback.print_exc()
                status = 1
    except _CheckTimeoutError:
        timed_out, status = True, -signal.SIGKILL
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    _kill_everything_else()
    captures = []
    for stream in (stdout, stderr):
        capture = _Capture(head, tail)
        capture.add(stream.getvalue().encode("utf-8", "replace"))
        captures.append(capture.reply())
    return {
        "exit_code": status,
        "timed_out": timed_out,
        "flooded": False,
        "stdout": captures[0],
        "stderr": captures[1],
    }


def _readable(path: str, mode: int, needed: int) -> None:
    """Give the owner the `needed` permission bits on `path` if it lacks them."""
    if mode & needed != needed:
        os.chmod(path, stat.S_IMODE(mode) | needed)


class _TooLargeError(Exception):
    """The packed workspace went over its size limit."""


def _add_tree(tar: tarfile.TarFile, directory: str, output: io.BytesIO, limit: int) -> None:
    """Add the entries of `directory` (relative to the working directory), recursively."""
    with os.scandir(directory) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        path = name if directory == "." else f"{directory}/{name}"
        info = tar.gettarinfo(path, arcname=path)
        if info is None or info.ischr() or info.isblk():  # sockets, devices
            continue
        mode = os.lstat(path).st_mode
        if info.isreg():
            _readable(path, mode, stat.S_IRUSR)
            with open(path, "rb") as f:
                tar.addfile(info, f)
        else:
            tar.addfile(info)
        if info.isdir():
            _readable(path, mode, stat.S_IRUSR | stat.S_IXUSR)
            _add_tree(tar, path, output, limit)
        if output.tell() > limit:
            raise _TooLargeError


def _pack(limit: int) -> tuple[str | None, str | None]:
    """The working directory as a base64 gzipped tar, or an error when it cannot be kept."""
    output = io.BytesIO()
    try:
        with tarfile.open(fileobj=output, mode="w:gz", compresslevel=1) as tar:
            _add_tree(tar, ".", output, limit)
    except _TooLargeError:
        return None, f"the workspace is over {limit} bytes compressed"
    except OSError as exc:
        return None, f"the workspace could not be read: {exc}"
    if output.tell() > limit:
        return None, f"the workspace is over {limit} bytes compressed"
    return base64.b64encode(output.getvalue()).decode("ascii"), None


def main() -> None:
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    request = json.loads(sys.stdin.buffer.readline())
    _unpack(sys.stdin.buffer.read())
    limits = request["timeout_s"], request["head_bytes"], request["tail_bytes"]
    if request["mode"] == "check":
        reply = _check(request["command"], *limits)
    else:
        reply = _run(["bash", "-c", request["command"]], *limits, request["flood_bytes"])
        reply["workspace"], reply["workspace_error"] = _pack(request["max_archive_bytes"])
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
