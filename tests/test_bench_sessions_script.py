"""``scripts/bench_sessions.py``: its summary, and a small side-by-side run of every server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from interop_venvs import side_python

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "bench_sessions.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bench_sessions

        yield bench_sessions
    finally:
        sys.path.remove(str(SCRIPT.parent))


def test_the_summary_counts_only_rows_that_met_the_goal_and_compares_per_core(bench):
    rows = [
        bench.Row("xpgym-openenv", 256, meets_goal=True),
        bench.Row("xpgym-openenv", 512, meets_goal=True),
        bench.Row("xpgym-openenv", 1024, meets_goal=False),
        bench.Row("openenv", 256, meets_goal=True),
        bench.Row("openenv", 512, meets_goal=False),
    ]
    summary = bench.summarize(rows, sleep=0.1, cores=2)
    assert summary["latency_bound_s"] == pytest.approx(0.2)
    assert summary["most_sessions_within_bound"] == {"xpgym-openenv": 512, "openenv": 256}
    assert summary["sessions_per_core_within_bound"] == {"xpgym-openenv": 256, "openenv": 128}
    assert summary["xpgym_openenv_over_openenv"] == pytest.approx(2.0)
    assert bench.summarize(rows[:3], 0.1, 2)["xpgym_openenv_over_openenv"] is None
    lucky = [*rows, bench.Row("openenv", 1024, meets_goal=True)]  # above its failed 512
    assert bench.summarize(lucky, 0.1, 2)["most_sessions_within_bound"]["openenv"] == 256


def test_a_row_keeps_the_first_three_errors_and_counts_all(bench):
    row = bench.Row("openenv", 8)
    for i in range(5):
        row.note(RuntimeError(f"boom {i}"))
    assert row.errors == 5
    assert row.first_errors == [f"RuntimeError: boom {i}" for i in range(3)]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_small_run_steps_every_session_on_every_server(tmp_path):
    side_python("openenv")  # OpenEnv's own server runs there
    output = tmp_path / "sessions.json"
    cmd = [sys.executable, str(SCRIPT), "--sessions", "8", "--turns", "2", "--sleep", "0.05"]
    subprocess.run([*cmd, "--output", str(output)], check=True, timeout=170, cwd=ROOT)
    result = json.loads(output.read_text())
    rows = {row["server"]: row for row in result["rows"]}
    assert set(rows) == {"xpgym-openenv", "xpgym-native", "openenv"}
    for row in rows.values():
        assert (row["opened"], row["errors"], row["steps"]) == (8, 0, 16), row
        assert row["step_p50_s"] >= 0.05  # every step slept in its env
        assert len(row["round_wall_s"]) == 2
        assert row["server_peak_rss_mb"] > 0
    assert "--rate-limit" in result["xpgym_limits_raised"]
