"""Fixtures of the fault-injection suite: a marker directory and the leak checks.

`no_orphans` counts this test process's child processes before and after a case: a case
passes only if every process it started (worker processes, servers) is gone and reaped
afterwards, within `HANG_GUARD_S`. `no_stray_threads` does the same for threads, after the
case has ended its stalls. Anything left over is killed (processes) before the assertion
fails, so a failing case leaves nothing behind either.
"""

from __future__ import annotations

import contextlib
import multiprocessing.resource_tracker
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_envs import release
from hang_guard import wait_until


@pytest.fixture
def marker_dir(tmp_path: Path) -> Iterator[Path]:
    """An empty directory for `FaultEnv`'s announcements; every stall in it ends at teardown."""
    path = tmp_path / "markers"
    path.mkdir()
    yield path
    release(path)


@pytest.fixture
def no_orphans() -> Iterator[None]:
    """Fail the case if a child process it started outlives it (alive or a zombie)."""
    psutil = pytest.importorskip("psutil", reason="counting the process tree needs psutil")
    # The spawn start method starts multiprocessing's resource tracker once per test process
    # and keeps it: it is not the case's to stop, so it is counted in the baseline.
    multiprocessing.resource_tracker.ensure_running()
    me = psutil.Process()
    before = {child.pid for child in me.children(recursive=True)}

    def started() -> list[psutil.Process]:
        return [child for child in me.children(recursive=True) if child.pid not in before]

    yield
    wait_until(lambda: not started())
    left = [child.as_dict(["pid", "name", "status", "cmdline"]) for child in started()]
    for child in started():
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    assert not left, f"processes left behind: {left}"


@pytest.fixture
def no_stray_threads(marker_dir: Path) -> Iterator[None]:
    """Fail the case if a thread it started is still running once its stalls have ended."""
    before = set(threading.enumerate())
    yield
    release(marker_dir)
    assert wait_until(lambda: set(threading.enumerate()) <= before), [
        t.name for t in set(threading.enumerate()) - before
    ]
