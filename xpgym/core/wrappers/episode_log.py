"""Log every finished episode to a JSON-lines file, from whatever process runs the env.

A trainer's own rollout workers (Ray actors, vLLM servers' agent loops, subprocesses) build
xpgym envs where the caller cannot reach them. Setting ``XPGYM_EPISODE_LOG=<directory>`` in
the environment of the launching process makes every env that a trainer's worker builds
through xpgym's adapters (and the recipes' own vector envs) log its episodes: their return,
length and env time land in ``<directory>/episodes-<host>-<pid>.jsonl`` (one file per
process: no two processes append to the same file), one line per step. `read_episode_log`
merges the files into one record per episode, in the order the episodes ended.
This is how the parity suite collects the same learning curve from every trainer
(`parity.curves.gpu`) and splits a step's time into env and policy (`parity.bench`).

`log_episodes_if_requested` is the one place xpgym reads the variable; the code that builds
envs inside a trainer's workers calls it (`xpgym.rollout.env_pool.make_trainer_env`,
the Oat adapter's vector env, the recipes' vector envs). `xpgym.make` itself never reads it.

Faults: the log never stops a run. A line that cannot be written whole (a full disk, a
quota, an I/O error) is cut back off the file, a warning is logged, and that env logs no
more (its steps go on). A process killed in the middle of a write can leave a last line
without its newline; `read_episode_log` skips such a torn last line (with a warning), so a
log stays readable up to its last whole record (``tests/faults/test_episode_log_faults.py``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xpgym.core.env import Env, Wrapper

__all__ = ["EPISODE_LOG_VARIABLE", "EpisodeLog", "log_episodes_if_requested", "read_episode_log"]

EPISODE_LOG_VARIABLE = "XPGYM_EPISODE_LOG"
"""The environment variable `log_episodes_if_requested` reads: the log's directory."""

logger = logging.getLogger(__name__)

_APPENDING = threading.Lock()
"""Held around each line's write: the envs of one process append to one file, and a line
that fails is cut back to the size the file had before it."""


def log_episodes_if_requested(env: Env) -> Env:
    """`env` in `EpisodeLog` when ``XPGYM_EPISODE_LOG`` names a directory, else `env` itself.

    The variable is read at each call (in the process that builds the env, so a worker
    process or Ray actor that inherited it logs to the same directory). A module-level
    function, so it pickles as a `make_vec` wrapper for worker processes.
    """
    directory = os.environ.get(EPISODE_LOG_VARIABLE)
    return EpisodeLog(env, directory) if directory else env


class EpisodeLog(Wrapper[Any]):
    """Log every step's running episode totals to ``<directory>/episodes-<host>-<pid>.jsonl``.

    Each step appends ``{"episode", "env_id", "seed", "return", "length", "correct",
    "env_s", "end", "done"}``: ``episode`` a key unique to this process's episode,
    ``return`` the sum of the episode's rewards so far, ``length`` its steps so far,
    ``correct`` the step's ``info.get("correct")`` (``None`` when not reported), ``env_s``
    the seconds spent inside the wrapped env's ``reset`` and ``step`` calls of the episode
    (so a rollout's time splits into env time and the rest), ``end`` the wall clock
    (`time.time`) after the step, and ``done`` whether the env ended the episode. The last
    line of an episode is the episode: `read_episode_log` keeps it. Logging every step means
    an episode the *caller* cut short (a token budget, a turn limit of the trainer's, a crash)
    is still logged with what it earned. The file is opened on the first step, in append
    mode, and every line is written with one unbuffered write. A line that cannot be
    written whole is cut back off the file and ends this env's logging, with a warning
    (module docstring, "Faults"); its steps go on.
    """

    def __init__(
        self,
        env: Env,
        directory: str | os.PathLike[str],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(env)
        self.directory = Path(directory)
        self.clock = clock
        self._fd: int | None = None
        self._path: Path | None = None
        self._failed = False
        self._episodes = 0
        self._seed: int | None = None
        self._return = 0.0
        self._length = 0
        self._env_s = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        begin = self.clock()
        result = self.env.reset(seed=seed, options=options)
        self._env_s = self.clock() - begin
        self._episodes += 1
        self._seed = seed
        self._return = 0.0
        self._length = 0
        return result

    def step(self, action: str) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        begin = self.clock()
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._env_s += self.clock() - begin
        self._return += float(reward)
        self._length += 1
        self._write(info.get("correct"), done=terminated or truncated)
        return obs, reward, terminated, truncated, info

    def get_wrapper_state(self) -> dict[str, Any]:
        """The episode's running totals (``seed``, ``return``, ``length``, ``env_s``)."""
        return {
            "seed": self._seed,
            "return": self._return,
            "length": self._length,
            "env_s": self._env_s,
        }

    def set_wrapper_state(self, state: dict[str, Any]) -> None:
        """Continue from a snapshot's totals as a new episode of its own: an env restored
        from another's snapshot (a GRPO group member) is logged apart from its source."""
        self._episodes += 1
        self._seed = state["seed"]
        self._return = float(state["return"])
        self._length = int(state["length"])
        self._env_s = float(state["env_s"])

    def _write(self, correct: Any, *, done: bool) -> None:
        if self._failed:
            return
        record = {
            "episode": f"{os.getpid()}-{id(self):x}-{self._episodes}",
            "env_id": self.spec.id if self.spec is not None else None,
            "seed": self._seed,
            "return": self._return,
            "length": self._length,
            "correct": correct if isinstance(correct, (bool, int, float)) else None,
            "env_s": self._env_s,
            "end": time.time(),
            "done": bool(done),
        }
        line = (json.dumps(record) + "\n").encode("utf-8")
        with _APPENDING:
            size = None
            try:
                if self._fd is None:
                    self.directory.mkdir(parents=True, exist_ok=True)
                    name = f"episodes-{socket.gethostname()}-{os.getpid()}.jsonl"
                    self._path = self.directory / name
                    self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                size = os.fstat(self._fd).st_size
                written = os.write(self._fd, line)
                if written != len(line):
                    raise OSError(f"wrote {written} of the line's {len(line)} bytes")
            except OSError as exc:
                self._give_up(exc, size)

    def _give_up(self, exc: OSError, size: int | None) -> None:
        """Cut a partly written line off (to `size`), stop logging, warn; never raises."""
        self._failed = True
        if self._fd is not None:
            if size is not None:
                try:
                    os.ftruncate(self._fd, size)
                except OSError as cut:
                    logger.debug("could not cut the episode log back: %s", cut)
            os.close(self._fd)
            self._fd = None
        logger.warning(
            "episode log %s: cannot write (%s); this env logs no more episodes, the run goes on",
            self._path or self.directory,
            exc,
        )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.env.close()


def read_episode_log(directory: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every episode `EpisodeLog` logged under `directory` (its last line), ordered by the
    time of its last step.

    A file's last line without its newline is a write that a killed process left torn: it
    is skipped, with a warning, when it is not a whole record.

    Raises:
        FileNotFoundError: `directory` holds no ``episodes-*.jsonl`` file.
        ValueError: A complete line is not JSON (the message names the file and line).
    """
    files = sorted(Path(directory).glob("episodes-*.jsonl"))
    if not files:
        raise FileNotFoundError(
            f"no episodes-*.jsonl under {directory}: was it set as {EPISODE_LOG_VARIABLE} "
            "for the run?"
        )
    episodes: dict[str, dict[str, Any]] = {}
    for path in files:
        lines = path.read_bytes().split(b"\n")
        # After the last newline: b"" for a file that ends whole, else a torn last line.
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                if number == len(lines):
                    logger.warning("%s:%d: skipped a torn last line (%s)", path, number, exc)
                    continue
                raise ValueError(f"{path}:{number}: not a JSON line ({exc})") from exc
            episodes[f"{path.name}/{record['episode']}"] = record
    return sorted(episodes.values(), key=lambda record: record["end"])
