"""One trainer harness run in a subprocess: bounded in time, logged, its memory measured.

The end-to-end runs whose trainer starts its own processes (Ray, vLLM's engine, DeepSpeed)
launch their CPU harness with `run_logged`: a fresh session (so a timeout kills the whole
process tree), output to a log file, Ray's ``RAY_ADDRESS`` dropped (the run starts its own
cluster, never joins one the caller points at), and the largest summed resident memory of
the process tree sampled while it runs; `launch_harness` is the one way such a run starts its
harness's launch module. `prepare_run_dir` gives each run its directory with the
settings its launch reads back (`read_settings`); `metric`, `max_metric` and `weight_report`
read what a trainer and the harness's observers logged.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parity.e2e.config import E2EConfig

__all__ = [
    "SETTINGS_FILE",
    "HarnessRun",
    "launch_harness",
    "log_tail",
    "max_metric",
    "metric",
    "prepare_run_dir",
    "read_settings",
    "run_logged",
    "weight_report",
]

SETTINGS_FILE = "settings.json"
"""The run's settings in its directory (`prepare_run_dir` writes, `read_settings` reads)."""


@dataclass(frozen=True)
class HarnessRun:
    """What `run_logged` measured of a run that exited with 0.

    Attributes:
        wall_s: Wall time from start to exit.
        peak_rss_gib: Largest summed resident memory of the process and its descendants,
            sampled every half second (pages shared between processes are counted once per
            process, so an upper bound).
    """

    wall_s: float
    peak_rss_gib: float


def run_logged(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    log_path: Path,
    limit_s: float,
    name: str,
) -> HarnessRun:
    """Run `command` with `env` (``RAY_ADDRESS`` removed), stdout and stderr to `log_path`.

    Raises:
        TimeoutError: it ran past `limit_s`; its whole process group is killed first.
        RuntimeError: it exited with a non-zero code. Both messages name `name` and end with
            the log's last lines.
    """
    environ = {key: value for key, value in env.items() if key != "RAY_ADDRESS"}
    start = time.perf_counter()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            list(command),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=environ,
            start_new_session=True,
        )
        peak = _PeakMemory(process.pid)
        try:
            returncode = process.wait(timeout=limit_s)
        except subprocess.TimeoutExpired as error:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise TimeoutError(
                f"{name} did not finish within {limit_s:.0f} s; log: {log_path}\n"
                f"{log_tail(log_path)}"
            ) from error
        finally:
            peak.stop()
    if returncode != 0:
        raise RuntimeError(f"{name} exited with {returncode}:\n{log_tail(log_path)}")
    return HarnessRun(wall_s=time.perf_counter() - start, peak_rss_gib=peak.gib)


def launch_harness(
    harness: str,
    run_dir: Path,
    warm_dir: Path,
    *,
    env: Mapping[str, str],
    limit_s: float,
    name: str,
) -> HarnessRun:
    """Run ``python -m <harness>.launch RUN_DIR WARM_DIR`` with `run_logged`, its log in
    ``RUN_DIR/launch.log`` (the harness reads its settings from `run_dir` and the warm model
    from `warm_dir`; both are passed absolute). Raises what `run_logged` raises."""
    command = [sys.executable, "-m", f"{harness}.launch", str(run_dir)]
    command.append(str(Path(warm_dir).resolve()))
    return run_logged(command, env=env, log_path=run_dir / "launch.log", limit_s=limit_s, name=name)


def weight_report(path: Path) -> dict[str, Any]:
    """What a harness's weight observer wrote to `path` (``{"changed": {param: bool},
    "syncs": int, "finite": bool}``) as result-dict fields: ``all_params_changed`` (False when
    nothing was reported), ``params_unchanged`` (sorted names), ``weight_syncs``,
    ``weights_finite`` (None when not reported)."""
    weights = json.loads(path.read_text()) if path.exists() else {}
    changed: dict[str, bool] = weights.get("changed", {})
    return {
        "all_params_changed": bool(changed) and all(changed.values()),
        "params_unchanged": sorted(k for k, v in changed.items() if not v),
        "weight_syncs": int(weights.get("syncs", 0)),
        "weights_finite": weights.get("finite"),
    }


def prepare_run_dir(
    out_dir: Path,
    trainer: str,
    cfg: E2EConfig,
    *,
    max_turns: int,
    max_len: int,
    stale: Iterable[str] = (),
) -> Path:
    """``<out_dir>/<trainer>_run`` (absolute), without the files `stale` of an earlier run,
    with `SETTINGS_FILE`: `cfg`'s env id (``warm.env``), steps, batch (``tasks_per_step``,
    ``group_size``), ``lr``, ``gamma``, ``max_new_tokens``, ``seed``, ``threads``, and the
    harness's `max_turns` per episode and `max_len` tokens per episode."""
    run_dir = (out_dir / f"{trainer}_run").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (run_dir / name).unlink(missing_ok=True)
    settings = {
        "env_id": cfg.warm.env,
        "steps": cfg.steps,
        "tasks_per_step": cfg.tasks_per_step,
        "group_size": cfg.group_size,
        "lr": cfg.lr,
        "gamma": cfg.gamma,
        "max_new_tokens": cfg.max_new_tokens,
        "max_turns": max_turns,
        "max_len": max_len,
        "seed": cfg.seed,
        "threads": cfg.threads,
    }
    (run_dir / SETTINGS_FILE).write_text(json.dumps(settings))
    return run_dir


def read_settings(run_dir: Path) -> dict[str, Any]:
    """The settings `prepare_run_dir` wrote into `run_dir` (a harness's launch reads them)."""
    settings: dict[str, Any] = json.loads((run_dir / SETTINGS_FILE).read_text())
    return settings


def log_tail(path: Path, lines: int = 40) -> str:
    """The last `lines` lines of the text file at `path`."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def metric(value: Any) -> float | None:
    """A logged value as a float (NaN kept, so that a NaN check sees it); None when absent."""
    return None if value is None else float(value)


def max_metric(values: Sequence[float | None]) -> float | None:
    """The largest of `values`, NaN if any is NaN; None when there are none."""
    present = [v for v in values if v is not None]
    if any(math.isnan(v) for v in present):
        return math.nan
    return max(present, default=None)


class _PeakMemory:
    """The largest summed RSS of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int, every_s: float = 0.5) -> None:
        self.gib = 0.0
        self._pid = pid
        self._every_s = every_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psutil

        while not self._done.wait(self._every_s):
            try:
                root = psutil.Process(self._pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            total = 0
            for process in tree:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    continue
            self.gib = max(self.gib, total / 2**30)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
