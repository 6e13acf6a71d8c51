"""What a sandbox call takes and gives: `SandboxLimits`, `SandboxResult`, the errors.

The values every part of `xpgym.core.sandbox` shares (the public `Sandbox` in
`xpgym.core.sandbox.executor`, the host side in `xpgym.core.sandbox.host`); import them from
`xpgym.core.sandbox`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEFAULT_PRELOAD",
    "EXIT_REASONS",
    "UNSAFE_NO_SANDBOX",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
]

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
    "logging",
    "math",
    "operator",
    "pathlib",
    "random",
    "re",
    "shutil",
    "statistics",
    "string",
    "textwrap",
    "traceback",
    "typing",
)
"""Modules the zygote imports once, so calls that use them do not pay for the import.

Besides the usual standard library of model-written programs: ``logging``, ``pathlib`` and
``shutil`` (with its compressors, which ``tarfile`` needs: the terminal env's runner imports
it in every call), which each call would otherwise import again.
"""


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
