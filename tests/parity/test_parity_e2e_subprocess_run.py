"""`parity.e2e.subprocess_run`: the harness runs' subprocess, bounded, logged and measured."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import psutil
import pytest

from parity.e2e.config import E2EConfig
from parity.e2e.subprocess_run import (
    launch_harness,
    log_tail,
    max_metric,
    metric,
    prepare_run_dir,
    read_settings,
    run_logged,
    weight_report,
)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_run_that_exits_cleanly_reports_its_time_and_memory(tmp_path: Path) -> None:
    code = "import os; print('ray', os.getenv('RAY_ADDRESS')); print('own', os.environ['MINE'])"
    env = {**os.environ, "RAY_ADDRESS": "127.0.0.1:1", "MINE": "yes"}
    done = run_logged(_python(code), env=env, log_path=tmp_path / "log", limit_s=60, name="ok")

    assert (tmp_path / "log").read_text().splitlines() == ["ray None", "own yes"]
    assert done.wall_s > 0
    assert done.peak_rss_gib >= 0


def test_a_failing_run_raises_with_its_name_and_the_log_tail(tmp_path: Path) -> None:
    code = "print('\\n'.join(f'line {k}' for k in range(100))); raise SystemExit(3)"
    with pytest.raises(RuntimeError, match="the trainer exited with 3") as error:
        run_logged(
            _python(code), env=os.environ, log_path=tmp_path / "log", limit_s=60, name="the trainer"
        )
    assert "line 99" in str(error.value)
    assert "line 59" not in str(error.value)  # the last 40 lines only


def test_a_run_past_its_limit_is_killed_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    with pytest.raises(TimeoutError, match="slow did not finish within 5 s") as error:
        run_logged(_python(code), env=os.environ, log_path=tmp_path / "log", limit_s=5, name="slow")
    assert "started" in str(error.value)
    assert _ends(int(pid_file.read_text()))


def _ends(pid: int, within_s: float = 30.0) -> bool:
    """Whether process `pid` is gone or a zombie within `within_s` (SIGKILL is delivered
    asynchronously; an orphan is reaped by whoever adopted it, if at all)."""
    try:
        process = psutil.Process(pid)
        process.wait(timeout=within_s)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return process.status() == psutil.STATUS_ZOMBIE
    return True


def test_logged_values_keep_nan_and_absence_apart(tmp_path: Path) -> None:
    assert metric(None) is None
    assert metric("2.5") == 2.5
    assert math.isnan(metric(float("nan")))
    assert max_metric([None, 1.0, 3.0]) == 3.0
    assert max_metric([None]) is None
    assert math.isnan(max_metric([1.0, float("nan")]))
    path = tmp_path / "text"
    path.write_text("a\nb\nc\n")
    assert log_tail(path, lines=2) == "b\nc"


def test_a_run_directory_starts_without_stale_reports_and_with_the_runs_settings(
    tmp_path: Path,
) -> None:
    old = tmp_path / "toy_run"
    old.mkdir()
    (old / "metrics.jsonl").write_text("{}\n")
    (old / "keep.log").write_text("x")
    cfg = E2EConfig(steps=2, lr=0.5)

    run_dir = prepare_run_dir(
        tmp_path, "toy", cfg, max_turns=3, max_len=64, stale=["metrics.jsonl"]
    )

    assert run_dir == old.resolve()
    assert sorted(p.name for p in run_dir.iterdir()) == ["keep.log", "settings.json"]
    settings = read_settings(run_dir)
    assert settings["env_id"] == cfg.warm.env
    assert (settings["steps"], settings["lr"], settings["max_turns"], settings["max_len"]) == (
        2,
        0.5,
        3,
        64,
    )
    assert settings["tasks_per_step"] * settings["group_size"] == 8


def test_a_harness_launch_gets_its_run_and_warm_directories_and_logs_into_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "lib" / "fake_harness"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "launch.py").write_text("import sys\nprint(sys.argv[1:])\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "lib")}
    monkeypatch.chdir(tmp_path)  # a relative warm directory is passed absolute
    launch_harness("fake_harness", run_dir, Path("warm"), env=env, limit_s=60, name="fake")
    logged = (run_dir / "launch.log").read_text().strip()
    assert logged == str([str(run_dir), str(tmp_path / "warm")])


def test_a_weight_report_becomes_the_result_fields_and_its_absence_fails_them(
    tmp_path: Path,
) -> None:
    report = tmp_path / "weights.json"
    changed = {"b": True, "a": False, "c": False}
    report.write_text(json.dumps({"changed": changed, "syncs": 3, "finite": True}))
    assert weight_report(report) == {
        "all_params_changed": False,
        "params_unchanged": ["a", "c"],
        "weight_syncs": 3,
        "weights_finite": True,
    }
    report.write_text('{"changed": {"a": true}, "syncs": 1}')
    assert weight_report(report)["all_params_changed"] is True
    assert weight_report(report)["weights_finite"] is None
    missing = weight_report(tmp_path / "absent.json")
    assert missing["all_params_changed"] is False  # nothing reported: not "all changed"
    assert missing["weight_syncs"] == 0
