"""The CPU-testable parts of the GPU parity run (`parity.curves.gpu`): the recipe command lines,
the curves read from episode logs, and the band that fails a trainer leaving it."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hang_guard import wait_until

from parity.curves import gpu
from parity.curves.gpu import (
    GPU_ENVS,
    TRAINERS,
    BandConfig,
    RunSpec,
    collect,
    failures,
    main,
    recipe_command,
    step_cost,
    supervise,
    verdicts,
)
from xpgym.core.wrappers.episode_log import read_episode_log
from xpgym.recipe_args import parse_dataclass_args

ROOT = Path(__file__).resolve().parents[2]

# Where each recipe keeps the batch size and the run length (their names differ).
BATCH_FLAG = {
    "verl": "train_batch_size",
    "openrlhf": "rollout_batch_size",
    "oat": "episodes_per_step",
    "rl2": "prompts_per_rollout",
    "roll": "rollout_batch_size",
    "trl": "batch_size",
}
STEPS_FLAG = {"verl": "total_steps", "roll": "max_steps", "trl": "max_steps"}


def _recipe_args(trainer: str, argv: list[str]) -> Any:
    path = ROOT / "recipes" / f"train_{trainer}.py"
    spec = importlib.util.spec_from_file_location(f"recipe_{trainer}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        return parse_dataclass_args(module.Args, "test", argv)
    finally:
        del sys.modules[spec.name]


@pytest.mark.parametrize("trainer", TRAINERS)
def test_each_command_parses_with_the_recipes_own_flags(trainer: str) -> None:
    spec = RunSpec(env="rg:leg_counting-v0", steps=7, episodes_per_step=32, seed=3)
    argv = recipe_command(trainer, spec)
    assert argv[:2] == ["python", f"recipes/train_{trainer}.py"]
    args = _recipe_args(trainer, argv[2:])
    assert (args.env_id, args.model, args.seed) == (spec.env, spec.model, 3)
    assert (args.lr, args.gamma, args.max_turns) == (spec.lr, spec.gamma, spec.max_turns)
    assert getattr(args, BATCH_FLAG[trainer]) == 32
    if trainer in STEPS_FLAG:
        assert getattr(args, STEPS_FLAG[trainer]) == 7
    if hasattr(args, "num_tasks"):  # one task per episode (TRL: per group of 4)
        per_task = getattr(args, "num_generations", 1)
        assert args.num_tasks * per_task == spec.episodes


def test_bad_specs_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="divisible by 4"):
        recipe_command("trl", RunSpec(episodes_per_step=6))
    with pytest.raises(ValueError, match="unknown trainer"):
        recipe_command("sglang", RunSpec())


def _rising(rng: np.random.Generator, shift: float = 0.0, points: int = 40) -> list[float]:
    return (np.linspace(0.2, 0.8, points) + shift + rng.normal(0, 0.03, points)).tolist()


def test_a_trainer_that_leaves_the_others_band_is_outside() -> None:
    rng = np.random.default_rng(0)
    runs = {name: [_rising(rng), _rising(rng)] for name in ("verl", "trl", "rl2")}
    runs["planted"] = [_rising(rng, shift=0.4), _rising(rng, shift=0.4)]
    result = verdicts(runs, BandConfig(window=5))
    assert {n: result[n]["verdict"] for n in runs} == {
        "verl": "inside",
        "trl": "inside",
        "rl2": "inside",
        "planted": "outside",
    }
    assert len(result["verl"]["curve"]) == 40


def test_curves_are_cut_to_the_shortest_run_and_a_lone_run_is_not_compared() -> None:
    rng = np.random.default_rng(1)
    runs = {"verl": [_rising(rng)[:30]], "trl": [_rising(rng), _rising(rng)]}
    result = verdicts(runs, BandConfig(window=5))
    assert result["verl"]["verdict"] == "inside"
    assert len(result["verl"]["curve"]) == 30
    assert result["trl"] == {
        "verdict": "not compared",
        "why": "1 other runs of 30 points (a band needs 2 runs)",
    }


def _write_log(directory: Path, returns: list[float]) -> None:
    directory.mkdir(parents=True)
    lines = [
        json.dumps(
            {"episode": f"1-a-{i}", "end": float(i), "return": r, "env_s": 0.01, "done": True}
        )
        for i, r in enumerate(returns)
    ]
    (directory / "episodes-host-1.jsonl").write_text("\n".join(lines) + "\n")


def test_collect_and_the_command_line_fail_a_planted_trainer(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    env_dir = tmp_path / "results" / "game_GuessTheNumber-v0"
    for name in ("verl", "trl", "rl2", "planted"):
        for seed in (0, 1):
            shift = 0.5 if name == "planted" else 0.0
            means = _rising(rng, shift=shift, points=20)
            _write_log(env_dir / f"{name}-seed{seed}", [m for m in means for _ in range(4)])
    (tmp_path / "results" / "logs").mkdir()  # not an env folder: skipped
    (env_dir / "oat-seed0").mkdir()  # a run that left no log: named in the failures
    report = collect(tmp_path / "results", episodes_per_step=4, cfg=BandConfig(window=5))
    assert list(report["envs"]) == ["game_GuessTheNumber-v0"]
    entry = report["envs"]["game_GuessTheNumber-v0"]
    assert entry["runs"]["verl"]["episodes"] == [80, 80]
    assert entry["trainers"]["planted"]["verdict"] == "outside"
    assert entry["trainers"]["verl"]["verdict"] == "inside"
    problems = failures(report)
    assert any("planted left the band" in p for p in problems)
    assert any("oat" in p and "no episodes" in p for p in problems)

    out, png = tmp_path / "report-gpu.json", tmp_path / "curves.png"
    argv = ["collect", str(tmp_path / "results"), "--episodes-per-step", "4"]
    assert main([*argv, "--out", str(out), "--plot", str(png)]) == 1
    assert json.loads(out.read_text())["envs"]["game_GuessTheNumber-v0"]["trainers"]
    assert png.stat().st_size > 0


def test_the_command_subcommand_prints_a_runnable_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["command", "--trainer", "roll", "--steps", "5"]) == 0
    line = capsys.readouterr().out.split()
    assert line[:2] == ["python", "recipes/train_roll.py"]
    assert line[line.index("--max-steps") + 1] == "5"


PLAY_FOREVER = """
import os, subprocess, sys
from xpgym.rollout.env_pool import make_trainer_env
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
open(sys.argv[1], "w").write(str(child.pid))
env = make_trainer_env("game:GuessTheNumber-v0-easy")
seed = 0
while True:
    env.reset(seed=seed)
    seed += 1
    done = False
    while not done:
        *_, terminated, truncated, _ = env.step("\\\\boxed{5}")
        done = terminated or truncated
"""


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"  # exited, not yet reaped


def test_supervise_stops_the_whole_group_once_the_episodes_are_logged(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    argv = [sys.executable, "-c", PLAY_FOREVER, str(pid_file)]
    status = supervise(argv, tmp_path / "log", 5, timeout_s=600, poll_s=0.1, grace_s=10)
    assert status == 0
    assert len(read_episode_log(tmp_path / "log")) >= 5
    assert wait_until(lambda: _gone(int(pid_file.read_text())))


def test_an_interrupted_supervise_stops_the_whole_group_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "grandchild.pid"
    argv = [sys.executable, "-c", PLAY_FOREVER, str(pid_file)]
    polls = []

    def interrupted(log_dir: Path) -> int:
        polls.append(log_dir)
        if pid_file.exists() and len(polls) > 1:
            raise KeyboardInterrupt  # what Ctrl-C or a test's timeout does mid-wait
        return 0

    monkeypatch.setattr(gpu, "_episodes_logged", interrupted)
    with pytest.raises(KeyboardInterrupt):
        supervise(argv, tmp_path / "log", 5, timeout_s=600, poll_s=0.1, grace_s=10)
    assert wait_until(lambda: _gone(int(pid_file.read_text())))


def test_supervise_returns_the_commands_failure_and_times_out(tmp_path: Path) -> None:
    failing = [sys.executable, "-c", "raise SystemExit(3)"]
    assert supervise(failing, tmp_path / "a", 5, timeout_s=600, poll_s=0.1) == 3
    silent = [sys.executable, "-c", "import time; time.sleep(3600)"]
    assert supervise(silent, tmp_path / "b", 5, timeout_s=0, poll_s=0.1, grace_s=10) == 124


def test_the_workflow_runs_every_trainer_on_every_gpu_env_with_two_seeds() -> None:
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load((ROOT / ".github/workflows/parity-gpu.yml").read_text())
    matrix = workflow["jobs"]["train"]["strategy"]["matrix"]
    assert tuple(matrix["trainer"]) == TRAINERS
    assert tuple(matrix["env"]) == GPU_ENVS
    assert len(matrix["seed"]) >= 2  # a trainer's curve is the mean of its seeds
    train = "\n".join(step.get("run", "") for step in workflow["jobs"]["train"]["steps"])
    assert "python -m parity.curves.gpu run" in train
    report = "\n".join(step.get("run", "") for step in workflow["jobs"]["report"]["steps"])
    assert "python -m parity.curves.gpu collect" in report
    assert set(workflow[True]) == {"workflow_dispatch", "schedule"}  # YAML reads `on` as True


def test_step_cost_is_read_from_the_ends_of_the_steps() -> None:
    records = [{"end": 10.0 + 2.0 * (i // 4), "env_s": 0.1} for i in range(12)]  # 3 steps
    cost = step_cost(records, 4)
    assert cost["step_s"] == pytest.approx(2.0)
    assert cost["env_s"] == pytest.approx(0.4)
    assert cost["env_share"] == pytest.approx(0.2)
    assert math.isnan(step_cost(records[:7], 4)["step_s"])  # one full step: no interval
