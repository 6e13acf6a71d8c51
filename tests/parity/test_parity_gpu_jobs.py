"""The GPU run's job table (`parity.curves.gpu_jobs`): the workflow's matrix gives every trainer
its job's Python, each job installs in the order its source builds need, and every job
resolved for its Python on the runner's platform against the package registries when
``scripts/setup.sh`` installed the test environment (a job on a Python its trainer does not
install on is reported)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from parity.curves import gpu
from parity.curves.gpu_jobs import (
    BUILD_TOOLS,
    CONTROL,
    JOBS,
    REPORT_NAME,
    RUNNER_PLATFORMS,
    GpuJob,
    Resolution,
    _declared,
    _exact,
    fingerprint,
    install_commands,
    main,
)

ROOT = Path(__file__).resolve().parents[2]


def _train_job() -> dict:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((ROOT / ".github/workflows/parity-gpu.yml").read_text())
    return workflow["jobs"]["train"]


def test_the_workflow_matrix_gives_each_trainer_its_jobs_python() -> None:
    matrix = _train_job()["strategy"]["matrix"]
    assert tuple(matrix["trainer"]) == tuple(JOBS) == gpu.TRAINERS
    pythons = {entry["trainer"]: entry["python"] for entry in matrix["include"]}
    assert pythons == {name: job.python for name, job in JOBS.items()}
    setup = next(s for s in _train_job()["steps"] if s.get("uses", "").startswith("actions/setup"))
    assert setup["with"]["python-version"] == "${{ matrix.python }}"


def test_the_workflow_installs_each_job_from_the_table() -> None:
    scripts = "\n".join(step.get("run", "") for step in _train_job()["steps"])
    assert 'python -m parity.curves.gpu_jobs install --trainer "${{ matrix.trainer }}"' in scripts
    for job in JOBS.values():  # no pin written into the workflow by hand
        for requirement in (*job.requirements, *job.built):
            assert requirement not in scripts


def test_torch_goes_first_and_the_source_builds_are_built_against_it() -> None:
    commands = install_commands(JOBS["openrlhf"], "py")
    assert commands[0] == ["py", "-m", "pip", "install", "torch==2.13.0"]
    assert commands[1] == ["py", "-m", "pip", "install", *BUILD_TOOLS]
    assert commands[2][:6] == ["py", "-m", "pip", "install", "--no-build-isolation", "--no-deps"]
    assert "deepspeed==0.19.6" in commands[2]
    assert "flash-attn==2.8.3" in commands[2]
    assert commands[3][:6] == ["py", "-m", "pip", "install", "-e", "."]
    assert "openrlhf[vllm]==0.11.2" in commands[3]
    assert len(commands) == 4


def test_roll_is_checked_out_at_its_commit_before_its_requirements_file_is_read() -> None:
    job = JOBS["roll"]
    assert job.checkout is not None
    commands = install_commands(job, "py")
    fetch = ["git", "-C", "ROLL", "fetch", "--depth", "1", job.checkout.url, job.checkout.commit]
    assert commands[:3] == [
        ["git", "init", "-q", "ROLL"],
        fetch,
        ["git", "-C", "ROLL", "checkout", "-q", "FETCH_HEAD"],
    ]
    assert len(job.checkout.commit) == 40
    assert commands[-1][-2:] == ["-r", f"ROLL/{job.checkout.requirements}"]
    assert "gem-llm==0.0.4" in commands[-1]


def test_install_refuses_a_python_that_is_not_the_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    other = next(name for name, job in JOBS.items() if job.python != "3.11")
    with pytest.raises(SystemExit):
        main(["install", "--trainer", other, "--dry-run"])
    assert f"runs on Python {JOBS[other].python}" in capsys.readouterr().err


def test_install_dry_run_prints_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install", "--trainer", "trl", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("-m pip install torch==2.11.0")
    assert "--no-build-isolation" in lines[2]  # reasoning-gym's sdists
    assert "trl==1.16.0" in lines[-1]


def test_pins_are_made_exact_so_a_local_cpu_build_does_not_match() -> None:
    assert _exact("verl[vllm]==0.9.1") == "verl[vllm]===0.9.1"
    assert _exact("verl[vllm]==0.9.1", extras=False) == "verl===0.9.1"
    assert _exact("torch>=2.4") == "torch>=2.4"


def test_declared_requirements_follow_markers_extras_and_self_references() -> None:
    report = {
        "install": [
            {
                "metadata": {
                    "name": "Top_Pkg",
                    "requires_dist": [
                        "plain>=1",
                        "old-only; python_version < '3.11'",
                        "for-x; extra == 'x'",
                        "top-pkg[y]; extra == 'x'",  # x asks for the package's own y
                        "for-y==2; extra == 'y'",
                        "for-z; extra == 'z'",
                        "built-here==1.0",
                        "windows-only; sys_platform == 'win32'",
                    ],
                }
            }
        ]
    }
    declared = _declared(report, {"top-pkg": {"x"}}, "3.10", skip={"built-here"})
    assert declared == ["plain>=1", "old-only", "for-x", "for-y==2"]
    assert _declared(report, {}, "3.11", skip=set()) == ["plain>=1", "built-here==1.0"]


def test_the_runner_platforms_are_linux_x86_64_manylinux() -> None:
    assert all(tag.endswith("_x86_64") for tag in RUNNER_PLATFORMS)
    assert "manylinux2014_x86_64" in RUNNER_PLATFORMS


REPORT = Path(sys.prefix) / REPORT_NAME
SETUP_MARKER = Path(sys.prefix) / "xpgym-trainers-installed"


def _setup_report() -> dict:
    """The resolution ``scripts/setup.sh`` wrote while installing (the package registries are
    reachable then, not while the tests run); it must be of the current job table."""
    if not REPORT.exists():
        if SETUP_MARKER.exists():
            pytest.fail(
                f"scripts/setup.sh installed this venv but wrote no {REPORT}: it could not "
                f"resolve the GPU jobs (see its output)"
            )
        pytest.skip(f"no {REPORT}: scripts/setup.sh resolves the GPU jobs while installing")
    report = json.loads(REPORT.read_text())
    assert report["fingerprint"] == fingerprint(), (
        f"the GPU job table changed since {REPORT} was written: re-run "
        f"python -m parity.curves.gpu_jobs resolve --all --report {REPORT}"
    )
    return report


def test_a_job_on_a_python_its_trainer_does_not_install_on_is_reported() -> None:
    control = _setup_report()["control"]
    assert (control["trainer"], control["python"]) == CONTROL == ("oat", "3.11")
    assert len(control["problems"]) == 1  # oat-llm 0.2.4 requires Python < 3.11
    assert "oat-llm===0.2.4" in control["problems"][0]
    assert "top packages" in control["problems"][0]


@pytest.mark.parametrize("trainer", list(JOBS))
def test_every_job_resolves_for_its_python_on_the_runner(trainer: str) -> None:
    job = JOBS[trainer]
    result = _setup_report()["jobs"][trainer]
    assert result["python"] == job.python
    assert result["problems"] == []
    assert result["versions"]["torch"] == job.torch_pin().partition("==")[2]


def test_resolve_all_reports_every_job_and_the_control(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`resolve_all`'s report and verdict, with pip stood in: a job with a problem, or a
    control that resolves, makes it False."""
    from parity.curves import gpu_jobs

    broken_jobs: list[str] = []

    def fake_resolve(job: GpuJob, python: str | None = None) -> Resolution:
        python = python or job.python
        control = job is JOBS[CONTROL[0]] and python == CONTROL[1]
        broken = control or any(job is JOBS[name] for name in broken_jobs)
        return Resolution(python=python, problems=["no wheel"] if broken else [])

    monkeypatch.setattr(gpu_jobs, "resolve", fake_resolve)
    assert gpu_jobs.resolve_all(tmp_path / "ok.json")
    report = json.loads((tmp_path / "ok.json").read_text())
    assert set(report["jobs"]) == set(JOBS)
    assert report["fingerprint"] == fingerprint()
    assert report["control"]["problems"] == ["no wheel"]
    broken_jobs.append("trl")
    assert not gpu_jobs.resolve_all(tmp_path / "bad.json")
    assert json.loads((tmp_path / "bad.json").read_text())["jobs"]["trl"]["problems"]
