"""`Sandbox`: the public executor of untrusted programs, and the shared `default_sandbox`.

This module holds what a caller sees: the arguments, their checks, the request a call
sends, the backend choice and the lifecycle. How a call runs is in
`xpgym.core.sandbox.host` (bubblewrap, the zygote) and `xpgym.core.sandbox.inside`; what a
program gets is in the package docstring (`xpgym.core.sandbox`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from xpgym.core.sandbox import host
from xpgym.core.sandbox.base import (
    DEFAULT_PRELOAD,
    UNSAFE_NO_SANDBOX,
    SandboxError,
    SandboxLimits,
    SandboxResult,
)

__all__ = ["Sandbox", "default_sandbox"]

logger = logging.getLogger(__name__)


class Sandbox:
    """Runs programs in bubblewrap namespaces with rlimits; thread-safe.

    What a program gets, the lifecycle and the limits of the design: `xpgym.core.sandbox`.

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
            paths[:0] = [Path(p).resolve() for p in host.site_packages()]
        for path in paths:
            if not path.is_dir():
                raise ValueError(f"extra path {str(path)!r} is not a directory")
        self._host_paths = tuple(str(p) for p in paths)
        self._runtime = host.Runtime(
            host_paths=self._host_paths, preload=preload, pool_size=pool_size
        )
        self._finalizer = weakref.finalize(self, self._runtime.shutdown)
        if backend == UNSAFE_NO_SANDBOX:
            logger.warning(
                "Sandbox(backend=%r): untrusted code will run WITHOUT any isolation (no "
                "namespaces, full network and filesystem access, only rlimits and a temp dir)",
                UNSAFE_NO_SANDBOX,
            )
        else:
            self._runtime.zygote_or_start()

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
        unsafe = self.backend == UNSAFE_NO_SANDBOX
        paths = list(self._host_paths) if unsafe else host.inside_paths(len(self._host_paths))
        request["sys_path"] = paths
        request["env"] = _program_env(paths, home="" if unsafe else "/tmp")
        if unsafe:
            return host.run_unsafe(request, limits)
        return self._runtime.run(request, limits)


def _program_env(python_path: Sequence[str], *, home: str) -> dict[str, str]:
    """The program's environment; the unsafe launcher fills in an empty `home`."""
    env = {
        "PATH": f"{host.interpreter_prefix()}/bin:/usr/local/bin:/usr/bin:/bin",
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
