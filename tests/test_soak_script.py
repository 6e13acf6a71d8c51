"""``scripts/soak.py``: its leak verdict, and its one-minute version (the CI soak run)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from script_modules import SCRIPTS, script_module

SCRIPT = SCRIPTS / "soak.py"


@pytest.fixture(scope="module")
def soak() -> Iterator[ModuleType]:
    with script_module("soak") as module:
        yield module


def flat_samples(soak: ModuleType, n: int) -> list[dict[str, float]]:
    return [{"t_s": 60.0 * i, **dict.fromkeys(soak.METRICS, 10.0)} for i in range(n)]


def test_flat_quantities_have_no_slope_and_pass(soak: ModuleType) -> None:
    slope = soak.slopes(flat_samples(soak, 10))
    assert slope == pytest.approx(dict.fromkeys(soak.METRICS, 0.0), abs=1e-9)
    assert soak.grown(slope, 5.0) == []


def test_a_leak_in_the_second_half_is_found(soak: ModuleType) -> None:
    samples = flat_samples(soak, 10)
    for i, sample in enumerate(samples[5:]):
        sample["fds"] += 3.0 * i  # three descriptors a minute, from the middle on
    slope = soak.slopes(samples)
    assert slope["fds"] == pytest.approx(3.0)
    assert soak.grown(slope, 5.0) == ["fds"]


def test_a_short_windows_jitter_is_not_a_leak(soak: ModuleType) -> None:
    slope = {**dict.fromkeys(soak.METRICS, 0.0), "fds": 2.0}  # one descriptor in 30 s
    assert soak.grown(slope, 0.5) == []
    assert soak.grown(slope, 5.0) == ["fds"]


def test_growth_only_while_warming_up_is_not_a_leak(soak: ModuleType) -> None:
    samples = flat_samples(soak, 10)
    for i, sample in enumerate(samples[:5]):
        sample["rss_mb"] += 20.0 * i - 80.0  # grows to the plateau, then stays
    assert soak.grown(soak.slopes(samples), 5.0) == []


def test_too_few_samples_give_no_slope(soak: ModuleType) -> None:
    assert soak.slopes(flat_samples(soak, 4)) == dict.fromkeys(soak.METRICS, 0.0)


def test_children_that_exit_or_start_between_the_readings_are_not_counted(
    soak: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    psutil = pytest.importorskip("psutil", reason="the soak run samples with psutil")
    python = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # lives until stdin closes
    staying = subprocess.Popen(python, stdin=subprocess.PIPE)
    leaving = subprocess.Popen(python, stdin=subprocess.PIPE)
    starting: list[subprocess.Popen[bytes]] = []

    def between_the_readings(seconds: float) -> None:
        assert leaving.stdin is not None
        leaving.stdin.close()
        leaving.wait()  # exited and reaped, as a pool reaps its worker
        starting.append(subprocess.Popen(python, stdin=subprocess.PIPE))

    monkeypatch.setattr(soak, "time", types.SimpleNamespace(sleep=between_the_readings))
    try:
        settled = soak.settled_children(psutil.Process(), settle_s=0.5)
        assert staying.pid in settled
        assert leaving.pid not in settled
        assert starting[0].pid not in settled
    finally:
        for child in [staying, leaving, *starting]:
            if child.stdin is not None and not child.stdin.closed:
                child.stdin.close()
            child.wait()


def test_a_zombie_nobody_reaps_is_counted(soak: ModuleType) -> None:
    psutil = pytest.importorskip("psutil", reason="the soak run samples with psutil")
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.05)
        assert zombie.pid in soak.settled_children(psutil.Process(), settle_s=0.2)
    finally:
        zombie.wait()


def write_mib(path: Path, mib: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * (mib * 2**20))


def test_rays_files_under_the_temp_dir_are_sampled_apart(
    soak: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("psutil", reason="the soak run samples with psutil")
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    write_mib(tmp_path / "ray" / "session_1" / "logs" / "worker.out", 1)
    write_mib(tmp_path / "xpgym-sandbox" / "scratch", 2)
    assert soak.ray_folder(tmp_path) == tmp_path / "ray"
    got = soak.sample(tmp_path)
    assert got["ray_logs_mb"] == pytest.approx(1.0)
    assert got["tmp_mb"] == pytest.approx(2.0)


def test_rays_files_under_ray_tmpdir_are_sampled_there(
    soak: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray keeps its sessions under ``RAY_TMPDIR`` where it is set (the test suite sets it)."""
    pytest.importorskip("psutil", reason="the soak run samples with psutil")
    run_tmp, ray_root = tmp_path / "run", tmp_path / "ray-root"
    monkeypatch.setenv("RAY_TMPDIR", str(ray_root))
    write_mib(ray_root / "ray" / "session_1" / "logs" / "worker.out", 1)
    write_mib(run_tmp / "scratch", 2)
    write_mib(run_tmp / "ray" / "not-rays", 3)  # a folder named ray that Ray does not use
    assert soak.ray_folder(run_tmp) == ray_root / "ray"
    got = soak.sample(run_tmp)
    assert got["ray_logs_mb"] == pytest.approx(1.0)
    assert got["tmp_mb"] == pytest.approx(5.0)


@pytest.mark.slow
def test_the_one_minute_soak_injects_faults_and_nothing_grows(tmp_path: Path) -> None:
    pytest.importorskip("psutil", reason="the soak run samples with psutil")
    pytest.importorskip("uvicorn", reason="the soak run serves a remote env (xpgym[remote])")
    output = tmp_path / "soak.json"
    argv = ["--duration-s", "60", "--sample-every-s", "10", "--output", str(output)]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert output.exists(), done.stderr[-5000:]
    report = json.loads(output.read_text())
    assert report["rounds"] > 0
    assert report["faults"]["worker_killed"] > 0
    assert report["faults"]["server_killed"] > 0
    if report["sandbox"] == "ok":
        assert report["faults"]["sandbox_killed"] > 0
    if importlib.util.find_spec("ray") is not None:
        assert report["ray"] == "ok"
        assert report["faults"]["actor_killed"] > 0
    assert len(report["samples"]) >= 6
    assert report["grown"] == [], report["slope_per_min"]
    assert done.returncode == 0, done.stderr[-5000:]
