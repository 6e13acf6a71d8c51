"""The episode log (`xpgym.core.wrappers.episode_log`: "Faults") under a full disk, a file
size quota and a process killed while it logs.

==================  =====================================================================
fault               outcome
==================  =====================================================================
full disk           every step goes on; the env warns once and logs no more
(``ENOSPC``)
quota               the line that crossed it is cut back off: the file ends with a whole
(``RLIMIT_FSIZE``)  record and reads back; the steps go on
killed while        `read_episode_log` reads every whole record; a torn last line (no
logging             newline, even a cut UTF-8 character) is skipped with a warning
==================  =====================================================================

The full disk is the log's own path made a link to ``/dev/full``; the quota is a spawned
child's ``RLIMIT_FSIZE`` (with ``SIGXFSZ`` ignored, a write past it is cut short, then
refused); the kill is a ``SIGKILL`` of a child logging as fast as it steps, wherever it is.
Each child is reaped (`no_orphans`).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import resource
import signal
import socket
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from hang_guard import HANG_GUARD_S, wait_until
from toy_envs import ToyEnv

from xpgym.core.wrappers.episode_log import EpisodeLog, read_episode_log

QUOTA = 1000
"""Bytes a child may write to a file: a few records (each about 200 bytes)."""

STEPS = 40
"""Steps a child plays: far more records than `QUOTA` holds."""

pytestmark = pytest.mark.usefixtures("no_orphans")
spawn = multiprocessing.get_context("spawn")


def play(log: EpisodeLog, steps: int) -> int:
    """Step `log` `steps` times (resetting when an episode ends); the steps played."""
    log.reset(seed=0)
    for played in range(1, steps + 1):
        _, _, terminated, truncated, _ = log.step("x")
        if terminated or truncated:
            log.reset(seed=played)
    return steps


def log_file(directory: Path, pid: int) -> Path:
    return directory / f"episodes-{socket.gethostname()}-{pid}.jsonl"


def test_a_full_disk_ends_the_log_not_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    log_file(tmp_path, os.getpid()).symlink_to("/dev/full")
    log = EpisodeLog(ToyEnv(episode_length=5), tmp_path)
    with caplog.at_level(logging.WARNING, logger="xpgym.core.wrappers.episode_log"):
        assert play(log, STEPS) == STEPS
    log.close()
    warnings = [r for r in caplog.records if "cannot write" in r.getMessage()]
    assert len(warnings) == 1, caplog.text  # once: the env logs no more
    assert "No space left" in warnings[0].getMessage()


def _log_under_quota(directory: str, sent: Connection) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the quota fails, not kills
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (QUOTA, hard))
    log = EpisodeLog(ToyEnv(episode_length=5), directory)
    sent.send(play(log, STEPS))
    log.close()


def test_a_quota_cuts_the_line_that_crossed_it_and_the_log_reads_back(tmp_path: Path) -> None:
    receive, send = spawn.Pipe(duplex=False)
    child = spawn.Process(target=_log_under_quota, args=(str(tmp_path), send))
    child.start()
    assert receive.poll(HANG_GUARD_S)
    assert receive.recv() == STEPS  # every step went on
    child.join(HANG_GUARD_S)
    assert child.exitcode == 0
    path = log_file(tmp_path, child.pid)
    data = path.read_bytes()
    assert 0 < len(data) <= QUOTA
    assert data.endswith(b"\n")  # the partly written line was cut back off
    assert data.count(b"\n") < STEPS  # the quota was reached
    assert read_episode_log(tmp_path) == read_episode_log_of_whole_lines(
        log_file(tmp_path, child.pid)
    )


def _log_until_killed(directory: str) -> None:
    log = EpisodeLog(ToyEnv(episode_length=5), directory)
    play(log, 10**9)  # until the test kills it (HANG_GUARD_S at most: see the test)


def test_a_process_killed_while_logging_leaves_every_whole_record_readable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    child = spawn.Process(target=_log_until_killed, args=(str(tmp_path),))
    child.start()
    path = log_file(tmp_path, child.pid)
    try:
        assert wait_until(lambda: path.exists() and path.read_bytes().count(b"\n") >= 5)
    finally:
        child.kill()  # wherever it is: between two lines or in a write
        child.join(HANG_GUARD_S)
    data = path.read_bytes()
    assert read_episode_log(tmp_path) == read_episode_log_of_whole_lines(path)
    # A torn last line, even one cut inside a UTF-8 character, is skipped, not an error.
    record = json.dumps({"episode": "torn", "end": 1e12, "env_id": "é"}, ensure_ascii=False)
    path.write_bytes(data[: data.rfind(b"\n") + 1] + record.encode("utf-8")[:-4])
    with caplog.at_level(logging.WARNING, logger="xpgym.core.wrappers.episode_log"):
        records = read_episode_log(tmp_path)
    assert "torn" not in {r["episode"] for r in records}
    assert records == read_episode_log_of_whole_lines(path)
    assert "skipped a torn last line" in caplog.text


def read_episode_log_of_whole_lines(path: Path) -> list[dict]:
    """What the log holds up to its last newline, one record per episode (its last line),
    ordered by end time: what `read_episode_log` must return around a torn last line."""
    episodes: dict[str, dict] = {}
    for line in path.read_bytes().split(b"\n")[:-1]:
        record = json.loads(line)
        episodes[record["episode"]] = record
    return sorted(episodes.values(), key=lambda r: r["end"])
