"""A terminal episode's workspace: files that persist across sandboxed shell commands.

The sandbox (`xpgym.core.sandbox`) gives every call a fresh, empty working directory,
so the workspace lives on the host between commands as one opaque value: a gzipped tar of
the working directory (`bytes`). Each command is one sandbox call that runs
`xpgym.envs.terminal.runner`: it unpacks the archive into the call's working directory, runs
the command there, kills whatever the command left running, packs the directory again and
hands back the new archive. The host never unpacks an archive (it only stores it and sends
it to the next call), so nothing a command writes ever touches the host's file system, and a
snapshot of the episode is just the archive.

What persists between commands: files, directories and symlinks with their contents, modes
and modification times. What does not: the current directory, shell variables, processes
(killed when their command ends) and anything outside the working directory (``/tmp``, also
``$HOME``). The workspace is limited to `WORKSPACE_BYTES` on disk and `ARCHIVE_BYTES`
compressed; a command whose resulting workspace cannot be kept (too large, or the command
killed the runner itself, e.g. ``kill -9 -1``) leaves the workspace as it was before the
command, and `RunResult.error` says why.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import io
import json
import logging
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any, Final

from xpgym.core.sandbox import (
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxUnavailableError,
)
from xpgym.core.text import join_cut

__all__ = [
    "ARCHIVE_BYTES",
    "FLOOD_BYTES",
    "WORKSPACE_BYTES",
    "RunResult",
    "pack_files",
    "run_check",
    "run_command",
]

WORKSPACE_BYTES: Final = 16 << 20
"""Size of the working directory's tmpfs: the most a workspace can hold."""

ARCHIVE_BYTES: Final = 16 << 20
"""Largest compressed workspace kept between commands."""

FLOOD_BYTES: Final = 8 << 20
"""A command that writes more than this to stdout or to stderr is killed."""

logger = logging.getLogger(__name__)

_CUT_MARKER: Final = "\n[... {cut} bytes cut ...]\n"  # see RunResult.stdout
_SETUP_MTIME: Final = 1704067200  # 2024-01-01 00:00:00 UTC: set-up files look the same every run
_SANDBOX_OVERHEAD_S: Final = 15.0  # wall-clock allowance for unpacking and packing
_MAX_PROCESSES: Final = 32


@dataclass(frozen=True)
class RunResult:
    """What one command (or check) did.

    Attributes:
        exit_code: Its exit status (``-signal`` if killed by a signal), or `None` when the
            run failed (see `error`).
        stdout: Standard output as text; if it was longer than the kept head and tail, the
            middle is replaced by a line ``[... N bytes cut ...]``.
        stderr: Standard error, same rule.
        timed_out: The command ran past its time limit and was killed.
        flooded: The command wrote more than `FLOOD_BYTES` to a stream and was killed.
        workspace: The workspace afterwards (command runs that could keep it), else `None`.
        error: Why the run failed or its workspace could not be kept, else `None`.
    """

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    flooded: bool = False
    workspace: bytes | None = None
    error: str | None = None


@cache
def _runner_source() -> str:
    return Path(__file__).with_name("runner.py").read_text(encoding="utf-8")


def pack_files(files: Mapping[str, str | bytes], modes: Mapping[str, int] | None = None) -> bytes:
    """A workspace holding `files` (relative path -> content), the same bytes every time.

    Parent directories are created (mode ``0o755``); files get mode ``0o644`` unless `modes`
    gives one. Every entry has the same fixed modification time.

    Raises:
        ValueError: a path is absolute, empty or contains ``..``; `modes` names a path that
            is not in `files`.
    """
    modes = dict(modes or {})
    unknown = sorted(set(modes) - set(files))
    if unknown:
        raise ValueError(f"modes given for paths that are not files: {unknown}")
    directories: set[str] = set()
    for name in files:
        path = PurePosixPath(name)
        if path.is_absolute() or not path.parts or ".." in path.parts:
            raise ValueError(f"workspace paths must be relative, without '..', got {name!r}")
        directories.update(str(parent) for parent in path.parents if str(parent) != ".")
    output = io.BytesIO()
    # mtime=0 in the gzip header and fixed tar metadata: the archive is reproducible.
    with (
        gzip.GzipFile(fileobj=output, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for directory in sorted(directories):
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, _SETUP_MTIME
            tar.addfile(info)
        for name in sorted(files):
            content = files[name]
            data = content.encode() if isinstance(content, str) else bytes(content)
            info = tarfile.TarInfo(str(PurePosixPath(name)))
            info.size, info.mode, info.mtime = len(data), modes.get(name, 0o644), _SETUP_MTIME
            tar.addfile(info, io.BytesIO(data))
    return output.getvalue()


def _limits(timeout_s: float) -> SandboxLimits:
    return SandboxLimits(
        cpu_seconds=timeout_s,
        wall_timeout_s=timeout_s + _SANDBOX_OVERHEAD_S,
        max_processes=_MAX_PROCESSES,
        tmp_size_bytes=WORKSPACE_BYTES,
        max_output_bytes=2 * ARCHIVE_BYTES,
    )


def _stream_text(stream: Mapping[str, Any]) -> str:
    """A stream of the runner's reply as text: its head and tail, and the bytes cut by the
    runner (which cannot import `xpgym.core.text`) noted between them."""
    return join_cut(str(stream["head"]), str(stream["tail"]), int(stream["cut"]), _CUT_MARKER)


def _run(
    sandbox: Sandbox,
    workspace: bytes,
    mode: str,
    command: str,
    *,
    timeout_s: float,
    head_bytes: int,
    tail_bytes: int,
) -> RunResult:
    request = {
        "mode": mode,
        "command": command,
        "timeout_s": timeout_s,
        "head_bytes": head_bytes,
        "tail_bytes": tail_bytes,
        "flood_bytes": FLOOD_BYTES,
        "max_archive_bytes": ARCHIVE_BYTES,
    }
    stdin = json.dumps(request).encode() + b"\n" + workspace
    try:
        result = sandbox.run_python(_runner_source(), stdin=stdin, limits=_limits(timeout_s))
    except SandboxUnavailableError:
        raise
    except SandboxError as exc:  # e.g. it could not be restarted: report it, go on
        logger.warning("terminal workspace: the sandbox failed: %s", exc)
        return RunResult(exit_code=None, error=f"the sandbox failed: {exc}")
    lines = result.stdout.splitlines()
    try:
        reply = json.loads(lines[-1]) if result.ok and lines else None
        if reply is None:
            raise ValueError("no reply")
        saved = reply.get("workspace")
        return RunResult(
            exit_code=reply["exit_code"],
            stdout=_stream_text(reply["stdout"]),
            stderr=_stream_text(reply["stderr"]),
            timed_out=bool(reply["timed_out"]),
            flooded=bool(reply["flooded"]),
            workspace=None if saved is None else base64.b64decode(saved, validate=True),
            error=reply.get("workspace_error"),
        )
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        how = result.exit_reason if result.exit_reason != "ok" else "a malformed reply"
        return RunResult(
            exit_code=None,
            error=(
                f"the shell session running the command ended abnormally ({how}; e.g. the "
                "command killed every process)"
            ),
        )


def run_command(
    sandbox: Sandbox,
    workspace: bytes,
    command: str,
    *,
    timeout_s: float = 10.0,
    head_bytes: int = 2000,
    tail_bytes: int = 1000,
) -> RunResult:
    """Run ``bash -c command`` in `workspace` (see the module docstring).

    Args:
        sandbox: Where to run it.
        workspace: The workspace before the command (from `pack_files` or an earlier run;
            ``b""`` for an empty one).
        command: Any shell text.
        timeout_s: Wall-clock (and per-process CPU) seconds before the command is killed.
        head_bytes, tail_bytes: How much of each output stream to keep from its start and
            its end.

    Returns:
        The `RunResult`; its `workspace` is the new workspace, or `None` when it could not
        be kept (then the caller keeps the old one). Nothing the command does raises, and a
        sandbox that fails (other than being unavailable) is reported in `RunResult.error`.

    Raises:
        SandboxUnavailableError: the sandbox cannot run on this machine.
    """
    return _run(
        sandbox,
        workspace,
        "command",
        command,
        timeout_s=timeout_s,
        head_bytes=head_bytes,
        tail_bytes=tail_bytes,
    )


def run_check(
    sandbox: Sandbox, workspace: bytes, source: str, *, timeout_s: float = 20.0
) -> RunResult:
    """Run the Python program `source` in `workspace`; exit status 0 means it passed.

    Same sandbox as `run_command`; the workspace is not packed again. The check sees the
    workspace as its working directory, but files there cannot shadow the modules it
    imports (the working directory is not on ``sys.path``, as with ``python -I``). It runs
    inside the runner's own interpreter (no second interpreter start), so its exit status,
    output and time limit follow ``python -c`` (see `xpgym.envs.terminal.runner`).
    """
    return _run(
        sandbox, workspace, "check", source, timeout_s=timeout_s, head_bytes=2000, tail_bytes=2000
    )
