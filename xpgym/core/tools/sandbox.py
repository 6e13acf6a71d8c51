"""Run untrusted programs in a real sandbox: bubblewrap namespaces, rlimits, a fresh tmpfs.

`Sandbox.run_python` runs a Python source string, `Sandbox.run` runs a program (argv) after
writing `files` into its working directory. Both return a `SandboxResult`; neither raises for
anything the program does (crash, timeout, memory, output flood, fork bomb). The process-wide
`default_sandbox()` is shared by every tool that is not given its own.

What a program gets (threat model: hostile code written by a model)
------------------------------------------------------------------

* Its own user, mount, pid, IPC and network namespaces: no network at all (not even a
  loopback shared with other calls), no view of host processes or of other calls.
* Read-only system directories: ``/usr``, ``/bin``, ``/lib*`` (bound or symlinked as on the
  host), ``/etc/ld.so.cache`` and ``/etc/alternatives``, and the interpreter's prefix
  (`sys.base_prefix`) with its own site-packages hidden (an empty read-only tmpfs): only the
  standard library imports. Third-party packages only when asked (``site_packages=True``
  binds the running venv's site-packages, `extra_paths` any directory) under
  ``/opt/xpgym/path<i>``. Nothing else of the host: not the repository, not ``$HOME``, not
  ``/root`` (only the prefix below it), not the host ``/tmp``.
* A fresh, private tmpfs at ``/tmp`` (the working directory and ``$HOME``) and another at
  ``/dev/shm``, each at most `SandboxLimits.tmp_size_bytes`; they live in the call's mount
  namespace and vanish with it. A fresh ``/proc`` showing only the call's own processes.
* rlimits: CPU seconds, address space, file size, processes, open files (core dumps off),
  set in the program's own process before its code runs, plus a wall-clock timeout and a cap
  on captured output (read incrementally; the program is killed when it goes over).
* The program runs as uid 1000 of its own user namespace, with no capabilities, an empty
  bounding set and ``no_new_privs``. When the host process is root, the whole sandbox runs as
  the host's ``nobody`` (uid 65534), because the kernel never applies ``RLIMIT_NPROC`` to
  uid 0: without that a fork bomb could exhaust the host's pids.
* When the call returns, every process it started is gone, double-forked daemons and
  ``setsid`` children included: the call's init, pid 1 of the call's pid namespace, kills
  and reaps them all before it reports (and should the init die, the kernel kills the whole
  namespace).

Design: a warm "zygote" with calls built ahead, not ``bwrap`` + ``python`` per call
-------------------------------------------------------------------------------------

Starting bubblewrap and then an interpreter for every call costs two process starts and a
Python start-up: measured, 2.3x a bare ``python -c`` spawn even without ``site``, where the
target is GEM's unsandboxed tool (``subprocess.run(["python", "-c", code])``, about a bare
spawn) and at most 1.5x a bare spawn. Instead, each `Sandbox` starts *one* bubblewrap sandbox
running a Python "zygote" (this very file, run with ``python -I -c``) that has imported the
standard library once (`DEFAULT_PRELOAD`) and frozen its heap (``gc.freeze``, so that calls
do not copy its pages). The zygote never runs user code; it only builds *calls* ahead of
time, ``pool_size`` of them, and one more for each call the host takes (asked for when that
call is over, or at once when the pool is empty). Building a call:

1. the call's *init* is cloned from the zygote (a raw ``clone`` into new user, mount, pid,
   IPC and network namespaces; the zygote writes its uid map) and mounts a fresh ``/proc``;
2. the init forks the call's *program* process, a copy of the clean interpreter, which
   waits on a socket.

A built call's socket goes to the host over the zygote's ``SOCK_SEQPACKET`` socket, whose
receive queue is the pool. To run a call, the host takes one and sends the program process
the call's pipes (``SCM_RIGHTS``: request, stdout, stderr, status, cancel); the zygote is
not on that path. The program process reads the request, hands the status and cancel pipes
to its init, mounts its tmpfs, writes `files`, applies the rlimits, drops every capability,
closes every other fd, and runs the code with ``exec`` in a fresh ``__main__`` (or
``execve``'s the argv). The init reaps every process of the call; when the program exits,
when the wall clock runs out, or when the host closes the cancel pipe (output cap, host
deadline, host death), it kills whatever is left in the namespace (``kill(-1)`` from pid 1),
reaps it, reports the program's wait status and rusage, and exits, which ends the
namespaces. The host returns once it has that report and EOF on stdout and stderr.

Each call is a fresh fork of the untouched zygote and is used once, so no state leaks from
one call to the next: not files (private tmpfs), not globals (fresh fork), not processes (pid
namespace), not SysV/POSIX IPC (IPC namespace and private ``/dev/shm``), not sockets
(network namespace). What a call costs on its critical path is two socket hand-offs, the
setup above and the program itself; namespaces and forks were paid for between calls.

Measured (``scripts/bench_tool_latency.py``, ``print(1)``, 2 busy vCPUs, medians of 5
rounds; details in ``docs/benchmarks.md``, "Sandboxed tool latency"): p50 alone 8.8 ms
sandboxed vs 13.5 ms for a bare spawn, 20.0 ms for GEM's unsandboxed tool and 31.3 ms for a
fresh ``bwrap`` + ``python -S`` per call; with 16 concurrent callers, 147 calls/s vs 80
(bare spawn) and 70 (GEM).

Differences from ``python -c`` worth knowing: modules the zygote preloaded (`DEFAULT_PRELOAD`)
are already in ``sys.modules``; ``random`` is reseeded in each call (``os.fork`` hook), but
the string hash seed is the zygote's, so ``set`` iteration order is the same in every call;
stdout is line-buffered, so output printed before a timeout is not lost.

Lifecycle and threads: a `Sandbox` is thread-safe; calls from many threads run concurrently
(each takes its own built call; the zygote builds more meanwhile). The zygote is started by the
constructor (so a missing bubblewrap is reported at once, as `SandboxUnavailableError`) from
a dedicated long-lived thread, because ``--die-with-parent`` ties the sandbox to the thread
that started it. If the zygote dies, calls in flight return ``exit_reason="killed"`` with a
note on stderr, and the next call starts a new one (a call that had not started yet is
retried once). After ``os.fork`` of the host, the child starts its own zygote on first use.

Requirements: Linux >= 5.3 with unprivileged user namespaces (nested ones too), on x86_64,
aarch64, riscv64 or ppc64 (the raw ``clone``), bubblewrap >= 0.5, Python >= 3.10. Modules
preloaded into the zygote must not start threads (checked: a copy of a process with other
threads can deadlock).
``Sandbox(backend="UNSAFE_NO_SANDBOX")`` runs programs as plain subprocesses (rlimits, a temp
dir, a process group and nothing else) and logs a warning each time one is constructed; it
is never chosen automatically.

Limits of the design, stated plainly: memory is capped per process (``RLIMIT_AS``), so a
program may hold up to ``max_processes * memory_bytes`` in total (plus its tmpfs); there is no
cgroup. There is no seccomp filter, so the kernel's full syscall surface (user namespaces
included) is reachable from inside. On kernels before 5.14, ``RLIMIT_NPROC`` counts every
process of the sandbox's host uid, not only the call's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import logging
import marshal
import os
import select
import shutil
import signal
import socket
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Final

__all__ = [
    "DEFAULT_PRELOAD",
    "EXIT_REASONS",
    "UNSAFE_NO_SANDBOX",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
    "default_sandbox",
]

logger = logging.getLogger(__name__)

UNSAFE_NO_SANDBOX: Final = "UNSAFE_NO_SANDBOX"
"""The `Sandbox` backend that runs programs without any isolation (explicit opt-in only)."""

EXIT_REASONS: Final = frozenset(
    {"ok", "error", "timeout", "cpu_limit", "memory", "output_limit", "killed"}
)
"""Every value `SandboxResult.exit_reason` can take; see `SandboxResult`."""

DEFAULT_PRELOAD: Final = (
    "abc",
    "ast",
    "bisect",
    "collections",
    "copy",
    "dataclasses",
    "datetime",
    "decimal",
    "fractions",
    "functools",
    "heapq",
    "itertools",
    "json",
    "math",
    "operator",
    "random",
    "re",
    "statistics",
    "string",
    "textwrap",
    "traceback",
    "typing",
)
"""Modules the zygote imports once, so calls that use them do not pay for the import."""

_SANDBOX_UID: Final = 1000
_NOBODY: Final = 65534
_STARTUP_TIMEOUT_S: Final = 60.0
_GRACE_S: Final = 2.0
_READ_CHUNK: Final = 65536
_FINAL_EVENTS: Final = frozenset({"exit", "stopped"})
_NOTE_SANDBOX_DIED: Final = "[xpgym sandbox: the sandbox failed during this call]\n"


# ---------------------------------------------------------------------------------------
# Public types
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one call. All are enforced per call, from a clean state.

    Attributes:
        cpu_seconds: CPU time of each process, rounded up to whole seconds (``RLIMIT_CPU``;
            ``SIGXCPU`` at the limit, ``SIGKILL`` one second later). Exceeding it gives
            ``exit_reason="cpu_limit"``.
        memory_bytes: Address space of each process (``RLIMIT_AS``), the interpreter's own
            mappings included (about 30-60 MB for Python). Allocations beyond it fail
            (``MemoryError`` in Python, reported as ``exit_reason="memory"``).
        file_size_bytes: Largest file a process may write (``RLIMIT_FSIZE``; writes beyond
            fail with ``EFBIG``).
        max_processes: Processes and threads the program may have at once, itself included
            (``RLIMIT_NPROC``, counted in the call's own user namespace). Forks beyond it
            fail with ``EAGAIN``.
        max_open_files: File descriptors per process (``RLIMIT_NOFILE``).
        wall_timeout_s: Wall-clock time of the whole call; the program and everything it
            started are killed then (``exit_reason="timeout"``).
        max_output_bytes: Bytes captured from stdout, and separately from stderr. The program
            is killed as soon as either goes over (``exit_reason="output_limit"``,
            ``output_truncated=True``); the captured prefix is kept.
        tmp_size_bytes: Size of the private tmpfs at ``/tmp`` (and of the one at ``/dev/shm``).
    """

    cpu_seconds: float = 5.0
    memory_bytes: int = 1 << 30
    file_size_bytes: int = 16 << 20
    max_processes: int = 16
    max_open_files: int = 256
    wall_timeout_s: float = 10.0
    max_output_bytes: int = 1 << 20
    tmp_size_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(
                    f"SandboxLimits.{field.name} must be a positive number, got {value!r}"
                )


@dataclass(frozen=True)
class SandboxResult:
    """What running one program produced.

    Attributes:
        stdout: Captured standard output, decoded as UTF-8 with ``errors="replace"``, at most
            `SandboxLimits.max_output_bytes` bytes before decoding.
        stderr: Captured standard error, same rules.
        exit_code: The exit status (``0`` = success) or ``-signal`` when the program was
            killed by a signal (as `subprocess` reports it); `None` when there is none (the
            sandbox failed before the program ran, or died during the call).
        exit_reason: One of `EXIT_REASONS`:
            ``"ok"`` exit status 0; ``"error"`` non-zero exit status (an exception, a failed
            test); ``"timeout"`` the wall-clock limit; ``"cpu_limit"`` the CPU-time limit;
            ``"memory"`` the program failed to allocate memory (a Python ``MemoryError`` as the
            last line of stderr); ``"output_limit"`` stdout or stderr exceeded the cap;
            ``"killed"`` any other signal, or the sandbox itself failed (a note says so on
            stderr).
        duration_s: Wall-clock seconds from sending the call to having its result.
        output_truncated: Whether stdout or stderr was cut at the cap.
        cpu_time_s: User + system CPU seconds of the program's main process (with its
            waited-for children), when known.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    exit_reason: str
    duration_s: float
    output_truncated: bool = False
    cpu_time_s: float | None = None

    @property
    def ok(self) -> bool:
        """``exit_reason == "ok"``."""
        return self.exit_reason == "ok"


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the program it ran)."""


class SandboxUnavailableError(SandboxError):
    """The sandbox cannot run on this machine (no bubblewrap, user namespaces refused)."""


# ---------------------------------------------------------------------------------------
# Host side
# ---------------------------------------------------------------------------------------


class Sandbox:
    """Runs programs in bubblewrap namespaces with rlimits; see the module docstring.

    Args:
        limits: Default limits of every call (each call may pass its own).
        backend: ``"bwrap"`` (default), or `UNSAFE_NO_SANDBOX` to run programs as plain
            subprocesses with rlimits only; that choice logs a warning every time.
        site_packages: Make the running interpreter's site-packages (a venv's) importable
            inside the sandbox, read-only. Off by default: only the standard library is
            visible (the interpreter's own site-packages are hidden too).
        extra_paths: More host directories to put on ``sys.path`` (and ``PYTHONPATH``),
            read-only. When the host process is root, the sandbox runs as ``nobody``: the
            files must be readable by every user.
        preload: Modules the zygote imports once (their import cost leaves every call);
            a module that fails to import is skipped with a warning.
        pool_size: Calls the zygote keeps built ahead (namespaces made, processes forked),
            so that a call does not wait for that; more only help bursts of concurrent
            calls. Each idle call is two small processes.

    Raises:
        SandboxUnavailableError: bubblewrap is missing, or the kernel refuses the user
            namespaces it needs; the message says how to install or enable them.
    """

    def __init__(
        self,
        *,
        limits: SandboxLimits | None = None,
        backend: str = "bwrap",
        site_packages: bool = False,
        extra_paths: Sequence[str | os.PathLike[str]] = (),
        preload: Sequence[str] = DEFAULT_PRELOAD,
        pool_size: int = 4,
    ) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        if backend not in ("bwrap", UNSAFE_NO_SANDBOX):
            raise ValueError(f"backend must be 'bwrap' or {UNSAFE_NO_SANDBOX!r}, got {backend!r}")
        self.limits = limits if limits is not None else SandboxLimits()
        self.backend = backend
        paths = [Path(p).resolve() for p in extra_paths]
        if site_packages:
            paths[:0] = [Path(p).resolve() for p in _site_packages()]
        for path in paths:
            if not path.is_dir():
                raise ValueError(f"extra path {str(path)!r} is not a directory")
        self._host_paths = tuple(str(p) for p in paths)
        self._preload = tuple(preload)
        self._pool_size = pool_size
        self._runtime = _Runtime()
        self._finalizer = weakref.finalize(self, self._runtime.shutdown)
        if backend == UNSAFE_NO_SANDBOX:
            logger.warning(
                "Sandbox(backend=%r): untrusted code will run WITHOUT any isolation (no "
                "namespaces, full network and filesystem access, only rlimits and a temp dir)",
                UNSAFE_NO_SANDBOX,
            )
        else:
            self._get_zygote()

    # -- public API ----------------------------------------------------------------------

    def run_python(
        self,
        code: str,
        *,
        stdin: str | bytes | None = None,
        files: Mapping[str, str | bytes] | None = None,
        limits: SandboxLimits | None = None,
    ) -> SandboxResult:
        """Run Python source `code` as ``python -c`` would, once.

        Args:
            code: The program. ``sys.argv == ["-c"]``; ``""`` (the working directory) is
                first on ``sys.path``, so modules in `files` import.
            stdin: Standard input (str is UTF-8 encoded); `None` means ``/dev/null``.
            files: Files to write into the working directory first, by relative path.
            limits: This call's limits (default: the sandbox's).

        Returns:
            The `SandboxResult`; nothing the program does raises.

        Raises:
            ValueError: a file path is absolute or leaves the working directory.
            SandboxError: the sandbox is closed or cannot be (re)started.
        """
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        return self._call({"mode": "python", "code": code}, stdin, files, limits)

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | bytes | None = None,
        files: Mapping[str, str | bytes] | None = None,
        limits: SandboxLimits | None = None,
    ) -> SandboxResult:
        """Run the program `argv` (looked up on the sandbox's ``PATH``) in a fresh directory.

        ``PATH`` inside is the interpreter prefix's ``bin`` then ``/usr/local/bin:/usr/bin:/bin``,
        so ``run(["python3", "test.py"], files={"test.py": ...})`` runs the host's Python
        version. A program that cannot be executed gives exit code 127 and a message on
        stderr. Args, returns and raises as in `run_python`.
        """
        argv = [str(arg) for arg in argv]
        if not argv:
            raise ValueError("argv must not be empty")
        return self._call({"mode": "argv", "argv": argv}, stdin, files, limits)

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._runtime.closed

    def close(self) -> None:
        """Stop the sandbox's processes and helper thread. Safe to call more than once.

        Also done when the `Sandbox` is garbage-collected and at interpreter exit.
        """
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Sandbox(backend={self.backend!r}, limits={self.limits!r})"

    # -- internals -----------------------------------------------------------------------

    def _call(
        self,
        request: dict[str, Any],
        stdin: str | bytes | None,
        files: Mapping[str, str | bytes] | None,
        limits: SandboxLimits | None,
    ) -> SandboxResult:
        if self.closed:
            raise SandboxError("this Sandbox is closed")
        limits = limits if limits is not None else self.limits
        request["stdin"] = stdin.encode() if isinstance(stdin, str) else stdin
        request["files"] = _check_files(files)
        request["limits"] = dataclasses.asdict(limits)
        request["env"] = self._program_env()
        if self.backend == UNSAFE_NO_SANDBOX:
            request["sys_path"] = list(self._host_paths)
            return _run_unsafe(request, limits)
        request["sys_path"] = [f"/opt/xpgym/path{i}" for i in range(len(self._host_paths))]
        payload = marshal.dumps(request)
        start = time.perf_counter()
        for attempt in range(2):
            zygote = self._get_zygote()
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

    def _program_env(self) -> dict[str, str]:
        if self.backend == UNSAFE_NO_SANDBOX:
            home = ""  # filled in with the temp dir by the launcher
            python_path = self._host_paths
        else:
            home = "/tmp"
            python_path = tuple(f"/opt/xpgym/path{i}" for i in range(len(self._host_paths)))
        env = {
            "PATH": f"{_interpreter_prefix()}/bin:/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": home,
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        if python_path:
            env["PYTHONPATH"] = os.pathsep.join(python_path)
        return env

    def _get_zygote(self) -> _Zygote:
        runtime = self._runtime
        with runtime.lock:
            if runtime.closed:
                raise SandboxError("this Sandbox is closed")
            if runtime.pid != os.getpid():  # a forked host: the parent's zygote is not ours
                runtime.pid, runtime.zygote, runtime.spawner = os.getpid(), None, None
            if runtime.zygote is not None and runtime.zygote.alive():
                return runtime.zygote
            if runtime.zygote is not None:
                runtime.zygote.kill()
            if runtime.spawner is None:
                runtime.spawner = _Spawner()
            runtime.zygote = runtime.spawner.call(
                _Zygote.start,
                host_paths=self._host_paths,
                preload=self._preload,
                pool_size=self._pool_size,
            )
            return runtime.zygote

    def _discard(self, zygote: _Zygote) -> None:
        with self._runtime.lock:
            if self._runtime.zygote is zygote:
                self._runtime.zygote = None
        zygote.kill()


class _Runtime:
    """The processes and thread a `Sandbox` owns (kept apart so a finalizer can stop them)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.zygote: _Zygote | None = None
        self.spawner: _Spawner | None = None
        self.pid = os.getpid()
        self.closed = False

    def shutdown(self) -> None:
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


_default_lock = threading.Lock()
_default: Sandbox | None = None


def default_sandbox() -> Sandbox:
    """The process-wide `Sandbox` with default settings, started on first use.

    Tools that are not given a sandbox share this one (one zygote per process, however
    many envs). A forked child process gets its own on first use.
    """
    global _default
    with _default_lock:
        if _default is None or _default.closed:
            _default = Sandbox()
        return _default


def _reset_default_after_fork() -> None:
    global _default, _default_lock
    _default_lock = threading.Lock()
    _default = None


os.register_at_fork(after_in_child=_reset_default_after_fork)


def _site_packages() -> list[str]:
    """The running interpreter's site-packages (a venv's, plus the base's if it includes it)."""
    import site

    return [path for path in site.getsitepackages() if os.path.isdir(path)]


def _interpreter_prefix() -> str:
    return os.path.realpath(sys.base_prefix)


def _interpreter() -> str:
    """The real interpreter binary (not a venv symlink): it must exist inside the sandbox."""
    prefix = _interpreter_prefix()
    for name in (f"python{sys.version_info[0]}.{sys.version_info[1]}", "python3"):
        candidate = os.path.join(prefix, "bin", name)
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
    return os.path.realpath(sys.executable)


def _own_source() -> str:
    """This file's source: the zygote and the unsafe launcher run it with ``python -c``."""
    return Path(__file__).read_text(encoding="utf-8")


def _check_files(files: Mapping[str, str | bytes] | None) -> dict[str, bytes]:
    checked: dict[str, bytes] = {}
    for name, content in (files or {}).items():
        path = PurePosixPath(name)
        if path.is_absolute() or not path.parts or ".." in path.parts or "\0" in name:
            raise ValueError(
                f"file names must be relative paths inside the working directory, got {name!r}"
            )
        if isinstance(content, str):
            content = content.encode()
        if not isinstance(content, (bytes, bytearray)):
            raise TypeError(f"file {name!r}: content must be str or bytes, got {type(content)}")
        checked[str(path)] = bytes(content)
    return checked


class _Spawner:
    """One long-lived thread that starts zygotes.

    ``bwrap --die-with-parent`` kills the sandbox when the *thread* that started it exits
    (``PR_SET_PDEATHSIG`` follows the parent thread), so zygotes must not be started from a
    short-lived worker thread.
    """

    def __init__(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._executor = ThreadPoolExecutor(1, thread_name_prefix="xpgym-sandbox-spawner")

    def call(self, fn: Any, /, **kwargs: Any) -> Any:
        return self._executor.submit(fn, **kwargs).result()

    def stop(self) -> None:
        self._executor.shutdown(wait=False)


def _base_site_packages() -> list[str]:
    """The interpreter's own site-packages directories that the sandbox binds (and hides)."""
    import site

    prefix = _interpreter_prefix()
    found = []
    for path in site.getsitepackages([sys.base_prefix]):
        real = os.path.realpath(path)
        inside = any(real == root or real.startswith(root + "/") for root in ("/usr", prefix))
        if inside and os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def _in_initial_user_namespace() -> bool:
    try:
        with open("/proc/self/uid_map") as f:
            return f.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return False


def _bwrap_mount_args(host_paths: Sequence[str]) -> list[str]:
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
    prefix = _interpreter_prefix()
    if not (prefix == "/usr" or prefix.startswith("/usr/")):
        parents = list(PurePosixPath(prefix).parents)[::-1][1:]  # without "/"
        for parent in parents:
            args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", prefix, prefix]
    for path in _base_site_packages():  # third-party packages only when asked for
        args += ["--tmpfs", path, "--remount-ro", path]
    if host_paths:
        args += ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", "/opt/xpgym"]
    for i, path in enumerate(host_paths):
        args += ["--ro-bind", path, f"/opt/xpgym/path{i}"]
    args += ["--proc", "/proc", "--dev", "/dev", "--dir", "/dev/shm", "--remount-ro", "/dev"]
    args += ["--dir", "/tmp", "--remount-ro", "/", "--chdir", "/"]
    return args


_USERNS_HELPER = """
import ctypes, os, sys
rc = ctypes.CDLL(None, use_errno=True).unshare(0x10000000)
os.write(1, b"%d\\n" % (ctypes.get_errno() if rc else 0))
sys.stdin.buffer.read()
"""


class _Zygote:
    """One running bubblewrap sandbox with its zygote, and the host end of its socket."""

    def __init__(self, proc: Any, sock: socket.socket, stderr_tail: list[str]) -> None:
        self.proc = proc
        self.sock = sock  # with a timeout, for waiting
        self._nowait = socket.socket(fileno=os.dup(sock.fileno()))
        self._nowait.setblocking(False)
        self._stderr_tail = stderr_tail
        self._dead = False

    @classmethod
    def start(cls, *, host_paths: Sequence[str], preload: Sequence[str], pool_size: int) -> _Zygote:
        """Start bubblewrap + zygote; raise `SandboxUnavailableError` if it cannot run."""
        import subprocess

        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise SandboxUnavailableError(
                "bubblewrap (bwrap) is not installed, so untrusted code cannot be sandboxed. "
                "Install it: `apt-get install bubblewrap` (Debian/Ubuntu), `dnf install "
                "bubblewrap` (Fedora) or `conda install -c conda-forge bubblewrap`. To run code "
                f"without any isolation anyway, pass Sandbox(backend={UNSAFE_NO_SANDBOX!r})."
            )
        host_sock, zygote_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pass_fds = [zygote_sock.fileno()]
        helper = None
        drop_root = os.geteuid() == 0 and _in_initial_user_namespace()
        args = [bwrap, "--die-with-parent", "--new-session"]
        try:
            if drop_root:
                try:
                    helper, userns_fd = _root_userns(subprocess)
                except OSError as exc:
                    logger.warning(
                        "the sandbox runs as root and cannot switch to user 'nobody' (%s): "
                        "max_processes is NOT enforced (the kernel exempts uid 0), so a fork "
                        "bomb can exhaust the host's pids; run as a non-root user or keep "
                        "CAP_SETUID and CAP_SETGID",
                        exc,
                    )
                    drop_root = False
            if drop_root:
                pass_fds.append(userns_fd)
                args += ["--userns", str(userns_fd), "--unshare-ipc", "--unshare-pid"]
                args += ["--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
                for cap in ("CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID"):
                    args += ["--cap-add", cap]
            else:
                args += ["--unshare-all", "--unshare-user"]
                args += ["--uid", str(_SANDBOX_UID), "--gid", str(_SANDBOX_UID)]
            args += _bwrap_mount_args(host_paths)
            args += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
            args += ["--setenv", "LANG", "C.UTF-8", "--setenv", "HOME", "/tmp"]
            for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                args += ["--setenv", name, "1"]  # preloads must not start threads
            config = {
                "fd": zygote_sock.fileno(),
                "drop_root": drop_root,
                "preload": list(preload),
                "pool_size": pool_size,
                "sys_path": [f"/opt/xpgym/path{i}" for i in range(len(host_paths))],
            }
            args += ["--", _interpreter(), "-I", "-B", "-c", _own_source(), "--xpgym-zygote"]
            args.append(json.dumps(config))
            proc = subprocess.Popen(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=pass_fds,
            )
        except BaseException:
            host_sock.close()
            if helper is not None:
                helper.kill()
                helper.wait()
                helper.stdin.close()
                helper.stdout.close()
            raise
        finally:
            zygote_sock.close()
            for fd in pass_fds[1:]:
                os.close(fd)
        stderr_tail: list[str] = []
        drain = threading.Thread(
            target=_drain_stderr, args=(proc, stderr_tail), daemon=True, name="xpgym-zygote-log"
        )
        drain.start()
        try:
            host_sock.settimeout(_STARTUP_TIMEOUT_S)
            ready = host_sock.recv(65536)
        except OSError:
            ready = b""
        finally:
            if helper is not None:
                helper.stdin.close()
                helper.wait()
                helper.stdout.close()
        info = json.loads(ready) if ready else {}
        if not info.get("ok"):
            proc.kill()
            proc.wait()
            drain.join(timeout=5)
            details = info.get("error") or "".join(stderr_tail).strip() or "no output"
            raise SandboxUnavailableError(
                f"the bubblewrap sandbox could not start: {details}. It needs unprivileged "
                "user namespaces, also nested ones: enable them with `sysctl -w "
                "kernel.unprivileged_userns_clone=1` (Debian kernels), `sysctl -w "
                "user.max_user_namespaces=15000`, or on Ubuntu >= 23.10 `sysctl -w "
                "kernel.apparmor_restrict_unprivileged_userns=0`; inside Docker, run the "
                "container with `--security-opt seccomp=unconfined --security-opt "
                "apparmor=unconfined` (bubblewrap: `apt-get install bubblewrap`)."
            )
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

    def take_call(self) -> tuple[socket.socket, bool]:
        """A pre-built call's dispatch socket, and whether its replacement is still owed.

        A call taken from the pool is replaced after it ran (`request_call`), so that the
        zygote builds while no call of ours runs; when the pool is empty, the replacement is
        asked for at once and this waits for it.

        Raises:
            _CallLostError: the zygote is gone or does not answer.
            SandboxError: the zygote cannot build calls.
        """
        flags = socket.MSG_CMSG_CLOEXEC
        owed = True
        try:  # a non-blocking socket object on the same socket: never waits
            message, fds, _, _ = socket.recv_fds(self._nowait, 4096, 1, flags)
        except BlockingIOError:  # the pool is empty: ask now, then wait
            self.request_call()
            owed = False
            try:
                message, fds, _, _ = socket.recv_fds(self.sock, 4096, 1, flags)
            except OSError:
                message, fds = b"", []
        except OSError:
            message, fds = b"", []
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
                dispatch, replace_later = self.take_call()
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
            _write_all(req_w, payload)
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
        if not events.keys() & _FINAL_EVENTS:  # the call's init died, or did not answer
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
            reason = _classify(code, cpu, limits, err)
        return _result(out, err, code, reason, start, truncated, cpu)


class _CallLostError(Exception):
    """A call got no result from the sandbox; `started`: whether its program may have run."""

    def __init__(self, *, started: bool) -> None:
        super().__init__(f"sandbox call lost (started={started})")
        self.started = started


def _root_userns(subprocess: Any) -> tuple[Any, int]:
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
    try:
        errno = int(helper.stdout.readline() or b"-1")
        if errno:
            raise SandboxUnavailableError(
                f"cannot create a user namespace ({os.strerror(errno) if errno > 0 else 'helper'}"
                " failed); enable unprivileged user namespaces (see the sandbox docs)"
            )
        mapping = f"0 0 1\n{_SANDBOX_UID} {_NOBODY} 1\n"
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{helper.pid}/{name}", "w") as f:
                f.write(mapping)
        fd = os.open(f"/proc/{helper.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    except BaseException:
        helper.kill()
        helper.wait()
        helper.stdin.close()
        helper.stdout.close()
        raise
    return helper, fd


def _drain_stderr(proc: Any, tail: list[str]) -> None:
    """Log what the zygote writes to stderr (it should write nothing once started)."""
    for raw in proc.stderr:
        line = raw.decode(errors="replace")
        tail.append(line)
        del tail[:-20]
        logger.warning("sandbox zygote: %s", line.rstrip())
    proc.stderr.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
    The status fd is read until EOF or until it holds a final event (`_FINAL_EVENTS`).
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
                        event in _FINAL_EVENTS for event in _parse_status(bytes(buffer))
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


def _run_unsafe(request: dict[str, Any], limits: SandboxLimits) -> SandboxResult:
    """The `UNSAFE_NO_SANDBOX` backend: a plain subprocess with rlimits in a temp dir.

    The program runs in its own session; the whole process group is killed when the program
    exits, times out or floods its output. A child that calls ``setsid`` escapes that.
    """
    import subprocess
    import tempfile

    start = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="xpgym-unsafe-")
    request["env"] = {**request["env"], "HOME": workdir, "TMPDIR": workdir}
    req_r, req_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [_interpreter(), "-I", "-B", "-c", _own_source(), "--xpgym-unsafe", str(req_r)],
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
            _write_all(req_w, marshal.dumps(request))
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


# ---------------------------------------------------------------------------------------
# Inside the sandbox. Everything below runs in the zygote (this file run as
# ``python -I -c <source> --xpgym-zygote CONFIG``) or in its forked children.
# Standard library only; no logging (stderr of the zygote is logged by the host).
# ---------------------------------------------------------------------------------------

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_CALL_NAMESPACES = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWNET
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MNT_DETACH = 2
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _clone_syscall_number() -> int:
    """``clone``'s syscall number; every listed ABI takes the flags first."""
    machine = os.uname().machine
    numbers = {"x86_64": 56, "aarch64": 220, "riscv64": 220, "ppc64le": 120, "ppc64": 120}
    if machine not in numbers:
        raise OSError(f"the sandbox does not support the {machine!r} architecture yet")
    return numbers[machine]


class _Libc:
    """The few libc calls Python 3.10 lacks (``unshare``, ``mount``, ``prctl``, ``capset``)."""

    def __init__(self) -> None:
        import ctypes

        class CapHeader(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class CapData(ctypes.Structure):
            _fields_ = [
                ("effective", ctypes.c_uint32),
                ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32),
            ]

        self._ctypes = ctypes
        self._lib = ctypes.CDLL(None, use_errno=True)
        self._cap_header = CapHeader()
        self._cap_data = (CapData * 2)()  # all zero: no capabilities

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            errno = self._ctypes.get_errno()
            raise OSError(errno, f"{what}: {os.strerror(errno)}")

    def clone(self, flags: int) -> int:
        """The raw ``clone`` syscall with a null stack (i.e. ``fork`` with `flags`)."""
        c_ulong = self._ctypes.c_ulong
        pid = self._lib.syscall(_clone_syscall_number(), c_ulong(flags), c_ulong(0), 0, 0, 0)
        if pid < 0:
            errno = self._ctypes.get_errno()
            raise OSError(errno, f"clone: {os.strerror(errno)}")
        return pid

    def mount(self, source: str, target: str, fstype: str, flags: int, data: str = "") -> None:
        self._check(
            self._lib.mount(
                source.encode(),
                target.encode(),
                fstype.encode(),
                self._ctypes.c_ulong(flags),
                data.encode() or None,
            ),
            f"mount {fstype} on {target}",
        )

    def umount(self, target: str) -> None:
        self._check(self._lib.umount2(target.encode(), _MNT_DETACH), f"umount {target}")

    def prctl(self, option: int, arg: int, arg3: int = 0) -> int:
        c_ulong = self._ctypes.c_ulong
        return self._lib.prctl(option, c_ulong(arg), c_ulong(arg3), c_ulong(0), c_ulong(0))

    def drop_capabilities(self) -> None:
        """Empty the bounding and ambient sets, then every capability set; no_new_privs."""
        cap = 0
        while self.prctl(_PR_CAPBSET_DROP, cap) == 0:
            cap += 1
        self.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
        header, data = self._cap_header, self._cap_data
        header.version, header.pid = _LINUX_CAPABILITY_VERSION_3, 0
        self._check(self._lib.capset(self._ctypes.byref(header), data), "capset")
        self._check(self.prctl(_PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")


def _sandbox_entry(argv: list[str]) -> None:
    """``--xpgym-zygote CONFIG`` or ``--xpgym-unsafe REQUEST_FD`` (see the module docstring)."""
    if argv[0] == "--xpgym-zygote":
        _zygote_main(json.loads(argv[1]))
    elif argv[0] == "--xpgym-unsafe":
        request = marshal.loads(_read_all(int(argv[1])))
        _unsafe_main(request)
    else:
        raise SystemExit(f"unknown sandbox entry {argv[0]!r}")


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _zygote_main(config: dict[str, Any]) -> None:
    """Set up once, then build calls for the host; never returns.

    Sends ``pool_size`` pre-built calls' dispatch sockets to the host at once, and one more
    each time the host says it took one: the socket's receive queue is the pool.
    """
    sock = socket.socket(fileno=config["fd"])
    libc = _Libc()
    info: dict[str, Any] = {"ok": True, "warnings": []}
    try:
        _cover_free_proc(libc, required=config["drop_root"])
        if config["drop_root"]:
            os.setgroups([])
            os.setresgid(_SANDBOX_UID, _SANDBOX_UID, _SANDBOX_UID)
            os.setresuid(_SANDBOX_UID, _SANDBOX_UID, _SANDBOX_UID)
            libc.drop_capabilities()
        # dumpable: the id maps of a new call (/proc/<pid>/uid_map) must be ours to write
        libc.prctl(_PR_SET_DUMPABLE, 1)
        sys.path.extend(config["sys_path"])
        for name in config["preload"]:
            try:
                __import__(name)
            except Exception as exc:  # a broken preload must not break the sandbox
                info["warnings"].append(f"preloading {name!r} failed: {exc!r}")
        threads = len(os.listdir("/proc/self/task"))
        if threads != 1:  # forking a process with other threads can deadlock its copies
            raise RuntimeError(f"the preloaded modules started {threads - 1} thread(s)")
        info["fresh_proc"] = _probe_call_namespaces(libc)
        for name in ("atexit", "io", "resource", "types"):  # what every call uses
            __import__(name)
        # Objects alive now are never collected: a collection in a call would write to
        # every one of them and copy all the zygote's pages (copy-on-write).
        gc.collect()
        gc.freeze()
    except Exception as exc:
        info = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    sock.send(json.dumps(info).encode())
    if not info["ok"]:
        os._exit(1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # calls' inits are reaped by the kernel
    try:
        for _ in range(config["pool_size"]):
            _send_call(libc, sock)
        while sock.recv(16):
            _send_call(libc, sock)  # the host took a call: build its replacement
    except OSError:
        pass
    os._exit(0)  # the host closed its end: the sandbox is no longer wanted


def _send_call(libc: _Libc, sock: socket.socket) -> None:
    """Build a call and hand its dispatch socket to the host (or the error, if none)."""
    try:
        dispatch = _build_call(libc, keep=[sock.fileno()])
    except OSError as exc:
        sock.send(json.dumps({"error": f"cannot build a call: {exc}"}).encode())
        return
    socket.send_fds(sock, [b"{}"], [dispatch.fileno()])
    dispatch.close()


def _cover_free_proc(libc: _Libc, *, required: bool) -> None:
    """Unmount what bubblewrap mounted over parts of ``/proc`` (only when it could).

    The kernel lets an unprivileged namespace mount a new procfs only if an existing one is
    fully visible; bubblewrap covers ``/proc/sys`` and friends when it runs as (mapped) root.
    """
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f]
    for mountpoint in reversed(mounts):
        if mountpoint.startswith("/proc/"):
            try:
                libc.umount(mountpoint)
            except OSError:
                if required:
                    raise


def _clone_into_namespaces(libc: _Libc) -> int:
    """Fork into new user/mount/pid/IPC/net namespaces, as ``fork`` returns.

    The child is pid 1 of its pid namespace and uid 1000 of its user namespace (mapped to
    our uid), with every capability there; it returns only once the parent wrote its id
    maps. A raw ``clone`` skips Python's after-fork hooks in the child: fine here, the
    zygote has a single thread and the child forks the program with ``os.fork``.
    """
    go_r, go_w = os.pipe()
    pid = libc.clone(_CALL_NAMESPACES | signal.SIGCHLD)
    if pid == 0:
        os.close(go_w)
        if os.read(go_r, 1) != b"1":
            os._exit(1)
        os.close(go_r)
        return 0
    os.close(go_r)
    try:
        uid, gid = os.getuid(), os.getgid()
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{_SANDBOX_UID} {uid} 1"),
            ("gid_map", f"{_SANDBOX_UID} {gid} 1"),
        ):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(text)
        os.write(go_w, b"1")
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        raise
    finally:
        os.close(go_w)
    return pid


def _probe_call_namespaces(libc: _Libc) -> bool:
    """Check, once, that a call's namespaces can be made; return whether /proc is fresh."""
    read_fd, write_fd = os.pipe()
    pid = _clone_into_namespaces(libc)
    if pid == 0:
        try:
            os.close(read_fd)
            fresh = _mount_proc(libc)
            _mount_tmp(libc, 1 << 20)
            os.write(write_fd, b"1" if fresh else b"0")
        except BaseException as exc:
            os.write(write_fd, f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    answer = _read_all(read_fd)
    os.waitpid(pid, 0)
    if answer not in (b"0", b"1"):
        raise OSError(f"cannot create a call's namespaces inside bubblewrap ({answer.decode()})")
    return answer == b"1"


def _mount_proc(libc: _Libc) -> bool:
    """A fresh /proc of the call's pid namespace; returns `False` if the kernel refused it.

    Then an empty read-only tmpfs covers /proc instead, so no call sees another.
    """
    try:
        libc.mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        return True
    except OSError:
        libc.mount("tmpfs", "/proc", "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "size=4k")
        return False


def _mount_tmp(libc: _Libc, size: int) -> None:
    """The call's private, writable tmpfs on /tmp and /dev/shm, `size` bytes each."""
    options = f"size={size},nr_inodes=16384,uid={_SANDBOX_UID},gid={_SANDBOX_UID}"
    libc.mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, options + ",mode=0700")
    libc.mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, options + ",mode=1777")


def _status(fd: int, event: str, **fields: Any) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, json.dumps({"event": event, **fields}).encode() + b"\n")


def _build_call(libc: _Libc, keep: Sequence[int]) -> socket.socket:
    """Build one call ahead of time; return its dispatch socket.

    The init ``G`` is cloned into the call's namespaces and mounts /proc; it forks the
    program process ``H``, which waits on the dispatch socket for the call's pipes. `keep`
    lists the zygote's fds, which the new call closes at once.
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = _clone_into_namespaces(libc)
    except BaseException:
        ours.close()
        theirs.close()
        raise
    if pid == 0:
        try:
            ours.close()
            for fd in keep:
                os.close(fd)
            _call_init(libc, theirs)
        finally:
            os._exit(70)
    theirs.close()
    return ours


def _call_init(libc: _Libc, dispatch: socket.socket) -> None:
    """The call's init ``G``, pid 1 of its namespaces; never returns.

    Mounts /proc, forks the program ``H`` and waits for it to take a call. Then reaps every
    process until the program exits, the wall clock runs out or the host closes the cancel
    pipe; it then kills and reaps whatever is left in the namespace, reports, and exits (the
    namespaces go with it). Signals from inside the namespace cannot kill it (the kernel
    drops them for an init without handlers), and it is not dumpable, so the program
    cannot ptrace it.
    """
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; programs must not
    _mount_proc(libc)
    os.setsid()
    to_init, to_program = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    program = os.fork()
    if program == 0:
        try:
            to_init.close()
            _run_call(libc, dispatch, to_program)
        finally:
            os._exit(71)
    dispatch.close()
    to_program.close()
    libc.prctl(_PR_SET_DUMPABLE, 0)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    message, fds, _, _ = socket.recv_fds(to_init, 4096, 2)
    if not message or len(fds) != 2:  # the program died before it got a call
        os._exit(0)
    st_fd, cancel_fd = fds
    deadline = time.monotonic() + json.loads(message)["wall_timeout_s"]
    poller = select.poll()
    poller.register(wake_r, select.POLLIN)
    poller.register(cancel_fd, select.POLLIN)
    while True:
        while True:  # reap everything that exited: orphans count against RLIMIT_NPROC
            try:
                pid, wait_status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
            if pid == program:
                cpu = usage.ru_utime + usage.ru_stime
                _end_call(st_fd, "exit", status=wait_status, cpu=cpu, maxrss_kb=usage.ru_maxrss)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _end_call(st_fd, "stopped", reason="timeout")
        ready = [fd for fd, _ in poller.poll(remaining * 1000 + 1)]
        if cancel_fd in ready:
            _end_call(st_fd, "stopped", reason="cancelled")
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)


def _end_call(st_fd: int, event: str, **fields: Any) -> None:
    """In the init: kill and reap every other process of the call, report, exit.

    Every process of the namespace whose parent died is the init's child, so an init
    without children is alone in its namespace (the common case: no ``kill(-1)`` needed).
    """
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        pass
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)  # from pid 1: every process of this pid namespace
        with contextlib.suppress(ChildProcessError):
            while True:
                os.wait()
    _status(st_fd, event, **fields)
    os._exit(0)


def _run_call(libc: _Libc, dispatch: socket.socket, to_init: socket.socket) -> None:
    """The program process ``H``: wait for a call, set it up, run it; never returns.

    Hands the status and cancel pipes to the init first, so that the wall clock runs and
    a failure below is reported; then writes the files, applies the rlimits, drops every
    capability and runs the code.
    """
    message, fds, _, _ = socket.recv_fds(dispatch, 16, 5)
    if not message or len(fds) != 5:  # the zygote is gone
        os._exit(0)
    req_fd, out_fd, err_fd, st_fd, cancel_fd = fds
    try:
        request = marshal.loads(_read_all(req_fd))
        limits = request["limits"]
        wall = json.dumps({"wall_timeout_s": limits["wall_timeout_s"]}).encode()
        socket.send_fds(to_init, [wall], [st_fd, cancel_fd])
        _mount_tmp(libc, limits["tmp_size_bytes"])
        os.chdir("/tmp")
        _write_files(request["files"])
        stdin_fd = _stdin_fd(request["stdin"])
        os.dup2(stdin_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        _apply_limits(limits)
        libc.drop_capabilities()
    except BaseException as exc:
        _status(st_fd, "error", message=f"call setup: {type(exc).__name__}: {exc}")
        os._exit(71)
    _status(st_fd, "started")
    os.closerange(3, 1 << 16)  # from here on, nothing of ours is reachable
    try:
        _run_program(request)
    finally:
        os._exit(71)


def _write_files(files: dict[str, bytes]) -> None:
    for name, content in files.items():
        directory = os.path.dirname(name)
        if directory:
            os.makedirs(directory, exist_ok=True)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o755)
        try:
            _write_all(fd, content)
        finally:
            os.close(fd)


def _stdin_fd(data: bytes | None) -> int:
    if data is None:
        return os.open("/dev/null", os.O_RDONLY)
    fd = os.memfd_create("stdin")
    _write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _apply_limits(limits: dict[str, Any]) -> None:
    import resource

    cpu = max(1, int(limits["cpu_seconds"] + 0.999))
    nproc = int(limits["max_processes"]) + 1  # + 1: the call's init is counted too
    for name, soft, hard in (
        ("RLIMIT_CPU", cpu, cpu + 1),
        ("RLIMIT_AS", int(limits["memory_bytes"]), int(limits["memory_bytes"])),
        ("RLIMIT_FSIZE", int(limits["file_size_bytes"]), int(limits["file_size_bytes"])),
        ("RLIMIT_NPROC", nproc, nproc),
        ("RLIMIT_NOFILE", int(limits["max_open_files"]), int(limits["max_open_files"])),
        ("RLIMIT_CORE", 0, 0),
    ):
        resource.setrlimit(getattr(resource, name), (soft, hard))


def _run_program(request: dict[str, Any]) -> None:
    """The program ``H``: exec the argv, or run the code in a fresh ``__main__``; exits."""
    env = request["env"]
    if request["mode"] == "argv":
        for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        argv = request["argv"]
        try:
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            os.write(2, f"cannot execute {argv[0]!r}: {exc.strerror}\n".encode())
            os._exit(127)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["-c"]
    sys.path.insert(0, "")
    sys.path.extend(path for path in request["sys_path"] if path not in sys.path)
    _fresh_std_streams()
    os._exit(_exec_main(request["code"]))


def _fresh_std_streams() -> None:
    import io

    def stream(fd: int, mode: str, **kwargs: Any) -> io.TextIOWrapper:
        raw = io.FileIO(fd, mode, closefd=False)
        buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
        return io.TextIOWrapper(buffered, encoding="utf-8", **kwargs)

    sys.stdin = sys.__stdin__ = stream(0, "r", errors="strict")
    sys.stdout = sys.__stdout__ = stream(1, "w", errors="strict", line_buffering=True)
    sys.stderr = sys.__stderr__ = stream(2, "w", errors="backslashreplace", line_buffering=True)


def _exec_main(code: str) -> int:
    """Run `code` as ``__main__`` like ``python -c``; return the process exit status."""
    import builtins
    import types

    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    status = 0
    try:
        exec(compile(code, "<string>", "exec"), main.__dict__)
    except SystemExit as exc:
        status = _system_exit_status(exc)
    except BaseException as exc:
        traceback = exc.__traceback__.tb_next if exc.__traceback__ else None
        sys.excepthook(type(exc), exc, exc.with_traceback(traceback).__traceback__)
        status = 1
    return _finalize(status)


def _system_exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{exc.code}\n")
    return 1


def _finalize(status: int) -> int:
    """What the interpreter does at exit: join threads, run atexit, flush the streams."""
    import atexit

    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except SystemExit as exc:
        status = _system_exit_status(exc)
    except BaseException:
        pass
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = status or 120
    return status


def _unsafe_main(request: dict[str, Any]) -> None:
    """The `UNSAFE_NO_SANDBOX` launcher: files, stdin, rlimits, then the program."""
    _write_files(request["files"])
    stdin_fd = _stdin_fd(request["stdin"])
    os.dup2(stdin_fd, 0)
    os.closerange(3, 1 << 16)  # also closes the status pipe: EOF for the host
    _apply_limits(request["limits"])
    _run_program(request)


if __name__ == "__main__" and sys.argv[1:2] in (["--xpgym-zygote"], ["--xpgym-unsafe"]):
    _sandbox_entry(sys.argv[1:])
