"""Start and stop another project's env server in a subprocess (importable as `own_server`).

The server script prints ``port <n>`` on its first line once it listens on 127.0.0.1, and may
announce each step it begins on the following lines (``step ...``). A thread reads everything
the server prints (a full pipe would block the server: ors-sdk logs each request there).
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from pathlib import Path

from hang_guard import HANG_GUARD_S

HERE = Path(__file__).resolve().parent


class OwnServer:
    """A server subprocess: `url` once started; `wait_for_step` reads its announcements.

    Args:
        python: The interpreter (a side venv's, or the test venv's).
        script: The server script, in this folder.
    """

    def __init__(self, python: str | os.PathLike[str], script: str) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(HERE / script)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        first = self.proc.stdout.readline()  # type: ignore[union-attr]  # a pipe
        if not first.startswith("port "):
            self.stop()
            raise RuntimeError(f"{script} did not start (printed {first!r})")
        self.url = f"http://127.0.0.1:{int(first.split()[1])}"
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]  # a pipe
            self._lines.put(line)
        self._lines.put("")  # the server ended

    def wait_for_step(self, marker: str) -> str:
        """The next printed line that contains `marker` ("" if the server ended first)."""
        while line := self._lines.get(timeout=HANG_GUARD_S):
            if marker in line:
                return line
        return ""

    def stop(self) -> None:
        """Kill the server (SIGKILL, as a crash would) and reap it."""
        self.proc.kill()
        self.proc.wait(HANG_GUARD_S)
        if hasattr(self, "_reader"):
            self._reader.join(HANG_GUARD_S)
        self.proc.stdout.close()  # type: ignore[union-attr]
