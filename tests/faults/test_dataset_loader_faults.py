"""The dataset loader (`xpgym.envs.common.datasets.load_split`): a process killed while
`datasets` prepares its on-disk cache, a load that runs out of room for it, a data file torn
by a killed writer.

==========================  ==================================================================
fault                       outcome
==========================  ==================================================================
SIGKILL while the cache is  the next load (a new process, same cache) replaces the
written                     ``.incomplete`` directory the dead one left and reads every row
file-size quota while the   `DatasetLoadError` naming the root cause (``File too large``);
cache is written            a later load without the quota reads every row
torn data file (no newline  `DatasetLoadError` with its cause, never a partial table
at the end, cut mid-row)
==========================  ==================================================================

Every load runs in a child process with ``HF_DATASETS_CACHE`` in the case's temporary
directory (`datasets` reads it at import). The kill point is deterministic: the child wraps
`datasets`' `ArrowWriter.write_table` to announce itself (its pid in a file) after the first
table is written, then waits to be killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hang_guard import HANG_GUARD_S, wait_until

pytest.importorskip("datasets", reason='dataset-backed envs need the envs extra: "xpgym[envs]"')

pytestmark = pytest.mark.usefixtures("no_orphans")

ROWS = 3000

LOAD = """
import json, sys
from xpgym.envs.common.datasets import DatasetLoadError, load_split
try:
    table = load_split(sys.argv[1])
except DatasetLoadError as exc:
    print(json.dumps({"error": str(exc)}))
else:
    print(json.dumps({"rows": table.num_rows, "last": table[table.num_rows - 1]}))
"""

STALL_IN_CACHE_WRITE = """
import os, sys, time
from pathlib import Path
import datasets.arrow_writer as arrow_writer
marker, write_table = Path(sys.argv[2]), arrow_writer.ArrowWriter.write_table
def write_then_stall(self, *args, **kwargs):
    write_table(self, *args, **kwargs)
    marker.write_text(str(os.getpid()))
    time.sleep(HANG_GUARD_S)
arrow_writer.ArrowWriter.write_table = write_then_stall
from xpgym.envs.common.datasets import load_split
load_split(sys.argv[1])
""".replace("HANG_GUARD_S", repr(HANG_GUARD_S))

QUOTA = (
    """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-quota write fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
"""
    + LOAD
)


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "rows.jsonl"
    with path.open("w") as out:
        for i in range(ROWS):
            out.write(json.dumps({"question": f"q{i}", "answer": str(i)}) + "\n")
    return path


def child_env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}


def load_in_child(tmp_path: Path, program: str, data: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", program, str(data)],
        env=child_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_load_killed_while_writing_the_cache_is_redone_by_the_next(
    tmp_path: Path, data_file: Path
) -> None:
    marker = tmp_path / "writing"
    child = subprocess.Popen(
        [sys.executable, "-c", STALL_IN_CACHE_WRITE, str(data_file), str(marker)],
        env=child_env(tmp_path),
    )
    try:
        assert wait_until(lambda: marker.exists() and marker.read_text() != "")
        os.kill(int(marker.read_text()), signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    assert list((tmp_path / "cache").rglob("*.incomplete")), "the kill left no partial cache"
    loaded = load_in_child(tmp_path, LOAD, data_file)
    assert loaded == {"rows": ROWS, "last": {"question": f"q{ROWS - 1}", "answer": str(ROWS - 1)}}
    assert not list((tmp_path / "cache").rglob("*.incomplete"))


def test_a_load_out_of_room_for_its_cache_is_a_load_error_naming_the_cause(
    tmp_path: Path, data_file: Path
) -> None:
    failed = load_in_child(tmp_path, QUOTA, data_file)
    assert "datasets.load_dataset failed" in failed["error"]
    assert "File too large" in failed["error"], failed["error"]
    loaded = load_in_child(tmp_path, LOAD, data_file)
    assert loaded["rows"] == ROWS


def test_a_torn_data_file_is_a_load_error_never_a_partial_table(
    tmp_path: Path, data_file: Path
) -> None:
    whole = data_file.read_bytes()
    data_file.write_bytes(whole[: len(whole) // 2 + 7])  # cut inside a row, no newline
    failed = load_in_child(tmp_path, LOAD, data_file)
    assert "datasets.load_dataset failed" in failed["error"]
    assert "caused by" in failed["error"], failed["error"]
