"""The host side of the sandbox: bubblewrap, the zygote, dispatching calls, collecting results.

Why a zygote, not ``bwrap`` + ``python`` per call
-------------------------------------------------

Starting bubblewrap and then an interpreter for every call costs two process starts and a
Python start-up, well above a bare ``python -c`` spawn, which is what GEM's unsandboxed tool
(``subprocess.run(["python", "-c", code])``) costs (numbers: docs/benchmarks.md, "Sandboxed
tool latency"). Instead, each `Sandbox` starts *one* bubblewrap sandbox
running a Python "zygote" (`xpgym.core.sandbox.inside`, whose source is run with ``python -I
-B -c``) that has imported the standard library once (`DEFAULT_PRELOAD`) and frozen its heap
(``gc.freeze``, so that calls do not copy its pages). The zygote never runs user code; it
only builds *calls* ahead of time, ``pool_size`` of them, and one more for each call the host
takes (asked for when that call is over, or at once when the pool is empty). Building a call
(inside, see that module): the call's *init* is cloned from the zygote into new namespaces
and mounts a fresh ``/proc``; it forks the call's *program* process, a copy of the clean
interpreter, which waits on a socket.

What the host does
------------------

A built call's socket comes to the host over the zygote's ``SOCK_SEQPACKET`` socket, whose
receive queue is the pool. To run a call, the host takes one and sends the program process
the call's pipes (``SCM_RIGHTS``: request, stdout, stderr, status, cancel); the zygote is
not on that path. It writes the request (`marshal`), reads stdout and stderr up to the
output cap, and closes the cancel pipe to stop the call (output cap, host deadline; host
death closes it too). It returns once it has the init's report on the status pipe (see
`xpgym.core.sandbox.inside` for the events) and EOF on stdout and stderr, and classifies
the outcome into an ``exit_reason``. What a call costs on its critical path is two socket
hand-offs, the call's setup and the program itself; namespaces and forks were paid for
between calls. Timings: ``docs/benchmarks.md``, "Sandboxed tool latency".

The zygote is started from a dedicated long-lived thread (`_Spawner`), because
``--die-with-parent`` ties the sandbox to the thread that started it. When the host process
is root, bubblewrap joins a user namespace made by a helper (`_root_userns`) in which the
zygote drops to host ``nobody``. `run_unsafe` is the `UNSAFE_NO_SANDBOX` backend: the same
inside code as a plain subprocess.
"""

from __future__ import annotations

import contextlib
import json
import logging
import marshal
import os
import select
import shutil
import signal
import site
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from typing import Any, Final

from xpgym.core.sandbox import inside
from xpgym.core.sandbox.base import (
    UNSAFE_NO_SANDBOX,
    SandboxError,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailableError,
)

__all__ = [
    "Runtime",
    "bwrap_mount_args",
    "inside_paths",
    "interpreter",
    "interpreter_prefix",
    "run_unsafe",
    "site_packages",
]

logger = logging.getLogger(__name__)

_NOBODY: Final = 65534
_STARTUP_TIMEOUT_S: Final = 60.0
_GRACE_S: Final = 2.0
_READ_CHUNK: Final = 65536
_NOTE_SANDBOX_DIED: Final = "[xpgym sandbox: the sandbox failed during this call]\n"


class Runtime:
    """The zygote of one `Sandbox` and the thread that starts it.

    Kept apart from the `Sandbox` so that a finalizer can call `shutdown` without keeping
    the `Sandbox` alive. The zygote is started on first use (`zygote_or_start`), started
    again when it died, and started anew in a forked child (the parent's is not its own).

    Args:
        host_paths: Host directories bound read-only at `inside_paths` (``sys.path``).
        preload: Modules the zygote imports once.
        pool_size: Calls the zygote keeps built ahead.
    """

    def __init__(
        self, *, host_paths: Sequence[str], preload: Sequence[str], pool_size: int
    ) -> None:
        self.host_paths = tuple(host_paths)
        self.preload = tuple(preload)
        self.pool_size = pool_size
        self.lock = threading.Lock()
        self.zygote: _Zygote | None = None
        self.spawner: _Spawner | None = None
        self.pid = os.getpid()
        self.closed = False

    def run(self, request: dict[str, Any], limits: SandboxLimits) -> SandboxResult:
        """Run one call of `request` (the keys `xpgym.core.sandbox.inside` reads) in bubblewrap.

        If the zygote dies, a call in flight returns ``exit_reason="killed"`` with a note on
        stderr; a call that had not started yet is retried once on a new zygote.

        Raises:
            SandboxError: the sandbox is closed, cannot be (re)started or cannot build calls.
        """
        payload = marshal.dumps(request)
        start = time.perf_counter()
        for attempt in range(2):
            zygote = self.zygote_or_start()
            try:
                return zygote.execute(payload, limits)
            except _CallLostError as lost:
                if not zygote.alive():
                    self._discard(zygote)
                if lost.started or attempt:
                    logger.warning("a sandbox call was lost: %s", lost)
                    return _result(b"", _NOTE_SANDBOX_DIED.encode(), None, "killed", start, False)
                logger.warning("a sandbox call was lost before it started; retrying it")
        raise AssertionError("unreachable")

    def zygote_or_start(self) -> _Zygote:
        """The running zygote; one is started (on the spawner thread) if there is none.

        Raises:
            SandboxError: `shutdown` was called.
            SandboxUnavailableError: the sandbox cannot start on this machine.
        """
        with self.lock:
            if self.closed:
                raise SandboxError("this Sandbox is closed")
            if self.pid != os.getpid():  # a forked host: the parent's zygote is not ours
                self.pid, self.zygote, self.spawner = os.getpid(), None, None
            if self.zygote is not None and self.zygote.alive():
                return self.zygote
            if self.zygote is not None:
                self.zygote.kill()
            if self.spawner is None:
                self.spawner = _Spawner()
            self.zygote = self.spawner.call(
                _Zygote.start,
                host_paths=self.host_paths,
                preload=self.preload,
                pool_size=self.pool_size,
            )
            return self.zygote

    def _discard(self, zygote: _Zygote) -> None:
        with self.lock:
            if self.zygote is zygote:
                self.zygote = None
        zygote.kill()

    def shutdown(self) -> None:
        """Stop the zygote and the spawner thread; later calls raise `SandboxError`."""
        with self.lock:
            self.closed = True
            zygote, self.zygote = self.zygote, None
            spawner, self.spawner = self.spawner, None
        if self.pid != os.getpid():  # inherited through fork: the parent's to stop
            return
        if zygote is not None:
            zygote.kill()
        if spawner is not None:
            spawner.stop()


def inside_paths(count: int) -> list[str]:
    """Where the sandbox mounts `count` host paths (``extra_paths``), in order."""
    return [f"/opt/xpgym/path{i}" for i in range(count)]


def site_packages() -> list[str]:
    """The running interpreter's site-packages (a venv's, plus the base's if it includes it)."""
    return [path for path in site.getsitepackages() if os.path.isdir(path)]


def interpreter_prefix() -> str:
    """The real directory of the interpreter's installation (`sys.base_prefix`)."""
    return os.path.realpath(sys.base_prefix)


def interpreter() -> str:
    """The real interpreter binary (not a venv symlink): it must exist inside the sandbox."""
    prefix = interpreter_prefix()
    for name in (f"python{sys.version_info[0]}.{sys.version_info[1]}", "python3"):
        candidate = os.path.join(prefix, "bin", name)
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
    return os.path.realpath(sys.executable)


def _inside_source() -> str:
    """The source of `xpgym.core.sandbox.inside`: the zygote and the unsafe launcher run it."""
    return Path(inside.__file__).read_text(encoding="utf-8")


class _Spawner:
    """One long-lived thread that starts zygotes.

    ``bwrap --die-with-parent`` kills the sandbox when the *thread* that started it exits
    (``PR_SET_PDEATHSIG`` follows the parent thread), so zygotes must not be started from a
    short-lived worker thread.
    """

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="xpgym-sandbox-spawner")

    def call(self, fn: Callable[..., _Zygote], /, **kwargs: Any) -> _Zygote:
        return self._executor.submit(fn, **kwargs).result()

    def stop(self) -> None:
        self._executor.shutdown(wait=False)


def _base_site_packages() -> list[str]:
    """The interpreter's own site-packages directories that the sandbox binds (and hides)."""
    prefix = interpreter_prefix()
    found = []
    for path in site.getsitepackages([sys.base_prefix]):
        real = os.path.realpath(path)
        inside_prefix = any(
            real == root or real.startswith(root + "/") for root in ("/usr", prefix)
        )
        if inside_prefix and os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def _in_initial_user_namespace() -> bool:
    try:
        with open("/proc/self/uid_map") as f:
            return f.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def bwrap_mount_args(host_paths: Sequence[str]) -> list[str]:
    """The read-only view of the host: system dirs, the interpreter prefix, extra paths."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]  # else made 0700: unreadable as nobody
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives"):
        args += ["--ro-bind-try", path, path]
    prefix = interpreter_prefix()
    if not (prefix == "/usr" or prefix.startswith("/usr/")):
        parents = list(PurePosixPath(prefix).parents)[::-1][1:]  # without "/"
        for parent in parents:
            args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", prefix, prefix]
    for path in _base_site_packages():  # third-party packages only when asked for
        args += ["--tmpfs", path, "--remount-ro", path]
    if host_paths:
        args += ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", "/opt/xpgym"]
    for path, target in zip(host_paths, inside_paths(len(host_paths)), strict=True):
        args += ["--ro-bind", path, target]
    args += ["--proc", "/proc", "--dev", "/dev", "--dir", "/dev/shm", "--remount-ro", "/dev"]
    args += ["--dir", "/tmp", "--remount-ro", "/", "--chdir", "/"]
    return args


_USERNS_HELPER = """
import ctypes, os, sys
rc = ctypes.CDLL(None, use_errno=True).unshare(0x10000000)
os.write(1, b"%d\\n" % (ctypes.get_errno() if rc else 0))
sys.stdin.buffer.read()
"""


def _find_bwrap() -> str:
    """The path of ``bwrap``.

    Raises:
        SandboxUnavailableError: bubblewrap is not installed (the message says how to get it).
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailableError(
            "bubblewrap (bwrap) is not installed, so untrusted code cannot be sandboxed. "
            "Install it: `apt-get install bubblewrap` (Debian/Ubuntu), `dnf install "
            "bubblewrap` (Fedora) or `conda install -c conda-forge bubblewrap`. To run code "
            f"without any isolation anyway, pass Sandbox(backend={UNSAFE_NO_SANDBOX!r})."
        )
    return bwrap


def _userns_for_root() -> tuple[subprocess.Popen[bytes], int] | None:
    """When the host process is root in the initial user namespace: the helper holding the
    user namespace the sandbox joins, and a descriptor of that namespace (`_root_userns`; the
    zygote then drops to host ``nobody``). `None` otherwise, or, with a warning, when the
    namespace cannot be made (an `OSError`).
    """
    if not (os.geteuid() == 0 and _in_initial_user_namespace()):
        return None
    try:
        return _root_userns()
    except OSError as exc:
        logger.warning(
            "the sandbox runs as root and cannot switch to user 'nobody' (%s): "
            "max_processes is NOT enforced (the kernel exempts uid 0), so a fork "
            "bomb can exhaust the host's pids; run as a non-root user or keep "
            "CAP_SETUID and CAP_SETGID",
            exc,
        )
        return None


def _zygote_command(
    bwrap: str,
    *,
    host_paths: Sequence[str],
    preload: Sequence[str],
    pool_size: int,
    zygote_fd: int,
    userns_fd: int | None,
) -> list[str]:
    """The ``bwrap`` command line that runs the zygote: namespaces and user
    (`_identity_args`), the read-only view of the host (`bwrap_mount_args`), a clean
    environment, then the interpreter running `xpgym.core.sandbox.inside` with its config."""
    config = {
        "fd": zygote_fd,
        "drop_root": userns_fd is not None,
        "preload": list(preload),
        "pool_size": pool_size,
        "sys_path": inside_paths(len(host_paths)),
    }
    args = [bwrap, "--die-with-parent", "--new-session", *_identity_args(userns_fd)]
    args += bwrap_mount_args(host_paths)
    args += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
    args += ["--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", "/tmp"]
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        args += ["--setenv", name, "1"]  # preloads must not start threads
    args += ["--", interpreter(), "-I", "-B", "-c", _inside_source(), inside.ZYGOTE_FLAG]
    return [*args, json.dumps(config)]


def _identity_args(userns_fd: int | None) -> list[str]:
    """The namespaces and the user of the sandbox: a new user namespace as
    `inside.SANDBOX_UID`, or, given `userns_fd` (host root, `_userns_for_root`), that namespace
    joined as its root with the capabilities the zygote needs to drop to ``nobody``."""
    if userns_fd is None:
        uid = str(inside.SANDBOX_UID)
        return ["--unshare-all", "--unshare-user", "--uid", uid, "--gid", uid]
    args = ["--userns", str(userns_fd), "--unshare-ipc", "--unshare-pid"]
    args += ["--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    for cap in ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID"):
        args += ["--cap-add", cap]
    return args


def _await_ready(
    host_sock: socket.socket, helper: subprocess.Popen[bytes] | None
) -> dict[str, Any]:
    """The zygote's start-up report (``{"ok": ..., "warnings" or "error": ...}``), or ``{}``
    when none came within `_STARTUP_TIMEOUT_S`. Ends the user-namespace `helper` either way:
    bubblewrap has joined its namespace by then."""
    try:
        host_sock.settimeout(_STARTUP_TIMEOUT_S)
        ready = host_sock.recv(65536)
    except OSError:
        ready = b""
    finally:
        if helper is not None:
            _end_helper(helper)
    return json.loads(ready) if ready else {}


def _start_failure(info: dict[str, Any], stderr_tail: list[str]) -> SandboxUnavailableError:
    """The error of a zygote that did not start, with its reason and how to enable
    unprivileged user namespaces."""
    details = info.get("error") or "".join(stderr_tail).strip() or "no output"
    return SandboxUnavailableError(
        f"the bubblewrap sandbox could not start: {details}. It needs unprivileged "
        "user namespaces, also nested ones: enable them with `sysctl -w "
        "kernel.unprivileged_userns_clone=1` (Debian kernels), `sysctl -w "
        "user.max_user_namespaces=15000`, or on Ubuntu >= 23.10 `sysctl -w "
        "kernel.apparmor_restrict_unprivileged_userns=0`; inside Docker, run the "
        "container with `--security-opt seccomp=unconfined --security-opt "
        "apparmor=unconfined` (bubblewrap: `apt-get install bubblewrap`)."
    )


class _Zygote:
    """One running bubblewrap sandbox with its zygote, and the host end of its socket."""

    def __init__(
        self, proc: subprocess.Popen[bytes], sock: socket.socket, stderr_tail: list[str]
    ) -> None:
        self.proc = proc
        self.sock = sock  # with a timeout, for waiting
        self._nowait = socket.socket(fileno=os.dup(sock.fileno()))
        self._nowait.setblocking(False)
        self._stderr_tail = stderr_tail
        self._dead = False

    @classmethod
    def start(cls, *, host_paths: Sequence[str], preload: Sequence[str], pool_size: int) -> _Zygote:
        """Start bubblewrap + zygote; raise `SandboxUnavailableError` if it cannot run."""
        bwrap = _find_bwrap()
        host_sock, zygote_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        userns = None
        try:
            userns = _userns_for_root()
            userns_fd = None if userns is None else userns[1]
            command = _zygote_command(
                bwrap,
                host_paths=host_paths,
                preload=preload,
                pool_size=pool_size,
                zygote_fd=zygote_sock.fileno(),
                userns_fd=userns_fd,
            )
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=[zygote_sock.fileno()] + ([] if userns_fd is None else [userns_fd]),
            )
        except BaseException:
            host_sock.close()
            if userns is not None:
                _kill_helper(userns[0])
            raise
        finally:
            zygote_sock.close()
            if userns is not None:
                os.close(userns[1])
        stderr_tail: list[str] = []
        drain = threading.Thread(
            target=_drain_stderr, args=(proc, stderr_tail), daemon=True, name="xpgym-zygote-log"
        )
        drain.start()
        info = _await_ready(host_sock, None if userns is None else userns[0])
        if not info.get("ok"):
            proc.kill()
            proc.wait()
            drain.join(timeout=5)
            raise _start_failure(info, stderr_tail)
        for warning in info.get("warnings", ()):
            logger.warning("sandbox: %s", warning)
        logger.debug("sandbox zygote started (pid %d): %s", proc.pid, info)
        return cls(proc, host_sock, stderr_tail)

    def alive(self) -> bool:
        return not self._dead and self.proc.poll() is None

    def kill(self) -> None:
        self._dead = True
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError):
            self._nowait.close()
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)

    def take_call(self, wait_s: float) -> tuple[socket.socket, bool]:
        """A pre-built call's dispatch socket, and whether its replacement is still owed.

        A call taken from the pool is replaced after it ran (`request_call`), so that the
        zygote builds while no call of ours runs; when the pool is empty, the replacement is
        asked for at once and this waits for it, at most `wait_s` seconds (a zygote that
        does not build one by then is stuck: stopped, or hung).

        Raises:
            _CallLostError: the zygote is gone or does not answer within `wait_s`.
            SandboxError: the zygote cannot build calls.
        """
        flags = socket.MSG_CMSG_CLOEXEC
        owed = True
        deadline = time.monotonic() + wait_s
        while True:  # the non-blocking socket object never waits; select does, boundedly
            try:
                message, fds, _, _ = socket.recv_fds(self._nowait, 4096, 1, flags)
                break
            except BlockingIOError:  # the pool is empty: ask now (once), then wait
                if owed:
                    self.request_call()
                    owed = False
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    message, fds = b"", []
                    break
                with contextlib.suppress(OSError):
                    select.select([self._nowait], [], [], remaining)
            except OSError:
                message, fds = b"", []
                break
        if not message:
            self._dead = True
            raise _CallLostError(started=False)
        if not fds:
            if owed:
                self.request_call()
            raise SandboxError(json.loads(message).get("error", "the zygote failed"))
        return socket.socket(fileno=fds[0]), owed

    def request_call(self) -> None:
        """Ask the zygote to build one more call."""
        with contextlib.suppress(OSError):
            self.sock.send(b"m")

    def execute(self, payload: bytes, limits: SandboxLimits) -> SandboxResult:
        """Run one call.

        Raises:
            _CallLostError: the call was lost (the sandbox died, or a built call did).
        """
        start = time.perf_counter()
        req_r, req_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        st_r, st_w = os.pipe()
        cancel_r, cancel_w = os.pipe()
        remote = [req_r, out_w, err_w, st_w, cancel_r]
        owed = 0
        try:
            for _ in range(3):  # a built call that died is skipped; the next one is fine
                dispatch, replace_later = self.take_call(limits.wall_timeout_s + _GRACE_S)
                owed += replace_later
                try:
                    socket.send_fds(dispatch, [b"c"], remote)
                    break
                except OSError:
                    continue
                finally:
                    dispatch.close()
            else:
                raise _CallLostError(started=False)
        except BaseException:
            for fd in (req_w, out_r, err_r, st_r, cancel_w):
                os.close(fd)
            for _ in range(owed):
                self.request_call()
            raise
        finally:
            for fd in remote:
                os.close(fd)
        try:
            return self._finish(start, req_w, out_r, err_r, st_r, cancel_w, payload, limits)
        finally:
            for _ in range(owed):
                self.request_call()

    def _finish(
        self,
        start: float,
        req_w: int,
        out_r: int,
        err_r: int,
        st_r: int,
        cancel_w: int,
        payload: bytes,
        limits: SandboxLimits,
    ) -> SandboxResult:
        """Send the request, collect the outputs and the report, make the result."""
        with contextlib.suppress(OSError):  # if the call died, the reads below tell
            inside.write_all(req_w, payload)
        os.close(req_w)
        deadline = start + limits.wall_timeout_s + _GRACE_S
        cancel_fds = [cancel_w]  # closing it makes the call's init kill the call

        def cancel() -> None:
            os.close(cancel_fds.pop())

        try:
            out, err, status, truncated, host_reason = _collect(
                out_r, err_r, st_r, deadline, limits.max_output_bytes, cancel
            )
        finally:
            if cancel_fds:
                os.close(cancel_fds.pop())
        events = _parse_status(status)
        if "error" in events:
            raise SandboxError(f"sandbox call failed: {events['error'].get('message')}")
        if not events.keys() & inside.FINAL_EVENTS:  # the call's init died, or did not answer
            if host_reason == "timeout":
                self.kill()
                return _result(out, err, None, "timeout", start, truncated)
            raise _CallLostError(started="started" in events)
        exit_event, stopped = events.get("exit"), events.get("stopped")
        code = cpu = None
        if exit_event is not None:
            code, cpu = _exit_code(exit_event["status"]), exit_event.get("cpu")
        if truncated:
            reason = "output_limit"
        elif stopped is not None:  # the init stopped the call: wall clock or host deadline
            reason = "timeout"
        else:
            assert code is not None  # the final event is "exit" when it is not "stopped"
            reason = _classify(code, cpu, limits, err)
        return _result(out, err, code, reason, start, truncated, cpu)


class _CallLostError(Exception):
    """A call got no result from the sandbox; `started`: whether its program may have run."""

    def __init__(self, *, started: bool) -> None:
        super().__init__(f"sandbox call lost (started={started})")
        self.started = started


def _root_userns() -> tuple[subprocess.Popen[bytes], int]:
    """A user namespace mapping uid 0 to host root and uid 1000 to host ``nobody``.

    Host root may map any uid. bubblewrap joins it (``--userns``) as uid 0, so it can still
    bind paths under ``/root`` (e.g. a pyenv interpreter); the zygote then drops to uid 1000,
    i.e. host ``nobody``, for which the kernel enforces ``RLIMIT_NPROC``.
    """
    helper = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _USERNS_HELPER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert helper.stdout is not None  # stdout=PIPE
    try:
        errno = int(helper.stdout.readline() or b"-1")
        if errno:
            raise SandboxUnavailableError(
                f"cannot create a user namespace ({os.strerror(errno) if errno > 0 else 'helper'}"
                " failed); enable unprivileged user namespaces (see the sandbox docs)"
            )
        mapping = f"0 0 1\n{inside.SANDBOX_UID} {_NOBODY} 1\n"
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{helper.pid}/{name}", "w") as f:
                f.write(mapping)
        fd = os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except BaseException:
        _kill_helper(helper)
        raise
    return helper, fd


def _kill_helper(helper: subprocess.Popen[bytes]) -> None:
    """Stop the user-namespace helper at once and close its pipes."""
    helper.kill()
    helper.wait()
    _close_pipes(helper)


def _end_helper(helper: subprocess.Popen[bytes]) -> None:
    """Let the user-namespace helper exit (it waits for EOF on stdin) and close its pipes."""
    if helper.stdin is not None:
        helper.stdin.close()
    helper.wait()
    _close_pipes(helper)


def _close_pipes(process: subprocess.Popen[bytes]) -> None:
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()


def _drain_stderr(proc: subprocess.Popen[bytes], tail: list[str]) -> None:
    """Log what the zygote writes to stderr (it should write nothing once started)."""
    assert proc.stderr is not None  # stderr=PIPE
    for raw in proc.stderr:
        line = raw.decode(errors="replace")
        tail.append(line)
        del tail[:-20]
        logger.warning("sandbox zygote: %s", line.rstrip())
    proc.stderr.close()


def _collect(
    out_r: int,
    err_r: int,
    status_r: int,
    deadline: float,
    cap: int,
    cancel: Callable[[], None],
    on_status: Callable[[], None] | None = None,
) -> tuple[bytes, bytes, bytes, bool, str | None]:
    """Read stdout, stderr and the status fd until EOF, at most `cap` bytes per stream.

    `cancel` is called (once) to stop the call: when a stream goes over `cap`, or at
    `deadline`; reading goes on until EOF, or for a grace period after a deadline cancel.
    The status fd is read until EOF or until it holds a final event (`inside.FINAL_EVENTS`).
    With `on_status`, `status_r` is a pidfd: it is not read, `on_status` is called when it
    becomes ready. Closes `out_r`, `err_r` and `status_r`. Returns ``(stdout, stderr, status,
    truncated, host_reason)``; `host_reason` is ``"output_limit"``, ``"timeout"`` or `None`.
    """
    buffers = {out_r: bytearray(), err_r: bytearray(), status_r: bytearray()}
    poller = select.poll()
    for fd in buffers:
        poller.register(fd, select.POLLIN)
    open_fds = set(buffers)
    truncated = final = False
    host_reason: str | None = None

    def stop(reason: str) -> None:
        nonlocal host_reason
        if host_reason is None:
            host_reason = reason
            cancel()

    def drop(fd: int) -> None:
        poller.unregister(fd)
        os.close(fd)
        open_fds.discard(fd)

    try:
        while open_fds - {status_r} or (status_r in open_fds and not final):
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                if host_reason == "timeout":
                    break
                stop("timeout")
                deadline = time.perf_counter() + _GRACE_S
                continue
            for fd, _ in poller.poll(remaining * 1000):
                if fd not in open_fds:
                    continue
                if fd == status_r and on_status is not None:
                    on_status()
                    drop(fd)
                    continue
                data = os.read(fd, _READ_CHUNK)
                if not data:
                    drop(fd)
                    continue
                buffer = buffers[fd]
                if fd == status_r:
                    buffer += data
                    final = final or any(
                        event in inside.FINAL_EVENTS for event in _parse_status(bytes(buffer))
                    )
                    continue
                room = cap - len(buffer)
                buffer += data[:room]
                if len(data) > room:
                    truncated = True
                    stop("output_limit")
                    drop(fd)
    finally:
        for fd in list(open_fds):
            drop(fd)
    out, err, status = (bytes(buffers[fd]) for fd in (out_r, err_r, status_r))
    return out, err, status, truncated, host_reason


def _parse_status(status: bytes) -> dict[str, dict[str, Any]]:
    events: dict[str, dict[str, Any]] = {}
    for line in status.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            events[event["event"]] = event
    return events


def _exit_code(wait_status: int) -> int:
    if os.WIFSIGNALED(wait_status):
        return -os.WTERMSIG(wait_status)
    return os.WEXITSTATUS(wait_status)


def _classify(code: int, cpu: float | None, limits: SandboxLimits, stderr: bytes) -> str:
    if code == 0:
        return "ok"
    if code in (-signal.SIGXCPU, -signal.SIGKILL) and (
        code == -signal.SIGXCPU or (cpu is not None and cpu >= limits.cpu_seconds)
    ):
        return "cpu_limit"
    if code > 0:
        last = stderr.rstrip().rsplit(b"\n", 1)[-1]
        if last == b"MemoryError" or last.startswith(b"MemoryError:"):
            return "memory"
        return "error"
    return "killed"


def _result(
    out: bytes,
    err: bytes,
    code: int | None,
    reason: str,
    start: float,
    truncated: bool,
    cpu: float | None = None,
) -> SandboxResult:
    return SandboxResult(
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        exit_code=code,
        exit_reason=reason,
        duration_s=time.perf_counter() - start,
        output_truncated=truncated,
        cpu_time_s=cpu,
    )


def run_unsafe(request: dict[str, Any], limits: SandboxLimits) -> SandboxResult:
    """The `UNSAFE_NO_SANDBOX` backend: a plain subprocess with rlimits in a temp dir.

    The program runs in its own session; the whole process group is killed when the program
    exits, times out or floods its output. A child that calls ``setsid`` escapes that.
    """
    start = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="xpgym-unsafe-")
    request["env"] = {**request["env"], "HOME": workdir, "TMPDIR": workdir}
    req_r, req_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [interpreter(), "-I", "-B", "-c", _inside_source(), inside.UNSAFE_FLAG, str(req_r)],
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            pass_fds=(req_r,),
            cwd=workdir,
            env=request["env"],
            start_new_session=True,
        )
    except BaseException:
        for fd in (req_w, out_r, err_r):
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    finally:
        for fd in (req_r, out_w, err_w):
            os.close(fd)

    def kill_group() -> None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)

    try:
        with contextlib.suppress(OSError):
            inside.write_all(req_w, marshal.dumps(request))
        os.close(req_w)
        out, err, _, truncated, host_reason = _collect(
            out_r,
            err_r,
            os.pidfd_open(proc.pid),
            start + limits.wall_timeout_s,
            limits.max_output_bytes,
            kill_group,
            on_status=kill_group,
        )
        returncode = proc.wait()
    finally:
        kill_group()
        shutil.rmtree(workdir, ignore_errors=True)
    reason = host_reason or _classify(returncode, None, limits, err)
    return _result(out, err, returncode, reason, start, truncated)
