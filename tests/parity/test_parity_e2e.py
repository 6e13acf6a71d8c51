"""End to end on CPU (`parity.e2e.runs`): TRL's own training loop runs through xpgym for real
steps from the cached warm tiny model, and the checks CI relies on catch what they name."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl", reason="TRL is not installed (scripts/setup.sh installs it)")

from e2e_steps import idle_steps_with_varied_returns

from parity.curves.gpu import collect
from parity.e2e.config import E2EConfig
from parity.e2e.runs import (
    LOGPROB_GAP_BOUND,
    TRAINERS,
    TrainerRun,
    all_runs,
    check,
    main,
    run,
    runs_of,
    table,
)
from parity.shared.warm_model import warm_model_dir
from xpgym.core.wrappers.episode_log import read_episode_log

STEPS = 2


@pytest.fixture(scope="module")
def trl_result(warm_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("parity_e2e")
    results = run(["trl"], E2EConfig(steps=STEPS), out, warm_dir=warm_model)
    assert (out / "trl.json").exists()
    return results["trl"]


@pytest.mark.timeout(600)
def test_trl_trains_for_real_through_xpgym(trl_result: dict[str, Any]) -> None:
    """No crash, every step done, policy tokens trained, every parameter moved, finite
    numbers, sampler and trainer agree on the log-probs."""
    assert check(trl_result, STEPS) == []
    assert len(trl_result["loss"]) == len(trl_result["grad_norm"]) == STEPS
    episodes = read_episode_log(Path(trl_result["episode_log"]))
    batch = E2EConfig().tasks_per_step * E2EConfig().group_size
    assert idle_steps_with_varied_returns(trl_result["grad_norm"], episodes, batch) == []
    assert any(g > 0 for g in trl_result["grad_norm"])
    assert "| trl | 2 |" in table({"trl": trl_result})


@pytest.mark.timeout(600)
def test_every_episode_trl_played_is_logged_and_collected_like_the_gpu_runs(
    trl_result: dict[str, Any],
) -> None:
    """The episode log of the run reads back through `parity.curves.gpu.collect`, the code that
    bands the GPU runners' curves: one point per step, each the mean of a step's episodes."""
    cfg = E2EConfig(steps=STEPS)
    batch = cfg.tasks_per_step * cfg.group_size
    assert trl_result["episodes_logged"] >= STEPS * batch
    assert len(trl_result["mean_return"]) == trl_result["episodes_logged"] // batch
    report = collect(Path(trl_result["episode_log"]).parent.parent, episodes_per_step=batch)
    (entry,) = report["envs"].values()
    assert entry["runs"]["trl"]["episodes"] == [trl_result["episodes_logged"]]
    assert entry["trainers"]["trl"]["verdict"] == "not compared"  # one trainer: no band


@pytest.mark.timeout(600)
def test_the_warm_model_is_built_once_and_reused(
    warm_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_pretrain(*args: object, **kwargs: object) -> None:
        raise AssertionError("the cached warm model was rebuilt")

    monkeypatch.setattr("parity.shared.warm_model.start_weights", must_not_pretrain)
    assert warm_model_dir(E2EConfig().warm, root=warm_model.parent) == warm_model
    assert (warm_model / "config.json").exists()


GOOD = {
    "trainer": "x",
    "steps_completed": 2,
    "policy_tokens": [10.0, 12.0],
    "all_params_changed": True,
    "params_changed": "4/4",
    "loss": [0.1, 0.2],
    "grad_norm": [1.0, 1.5],
    "max_logprob_gap": 1e-5,
}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"error": "RuntimeError: boom"}, "crashed"),
        ({"steps_completed": 1}, "1 of 2 steps"),
        ({"policy_tokens": [10.0, 0.0]}, "no policy token"),
        ({"all_params_changed": False, "params_changed": "3/4"}, "parameters unchanged"),
        ({"loss": [0.1, math.nan]}, "NaN"),
        ({"max_logprob_gap": 2 * LOGPROB_GAP_BOUND}, "max_logprob_gap"),
        ({"max_logprob_gap": None, "max_prob_gap": 1e-3}, "max_prob_gap 0.001 > 0.0001"),
        ({"max_logprob_gap": None}, "no sampler vs trainer gap"),
    ],
)
def test_check_names_each_failure(change: dict[str, Any], problem: str) -> None:
    assert check(GOOD, 2) == []
    (line,) = check({**GOOD, **change}, 2)
    assert problem in line


def _fake_run(name: str, seen: list[tuple[str, E2EConfig]]) -> Callable[..., dict[str, Any]]:
    def fake(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
        seen.append((name, cfg))
        rollout = {"rollout": cfg.rollout or "stand_in"} if name == "choosy" else {}
        return {
            **GOOD,
            "trainer": name,
            **rollout,
            "startup_s": 1.0,
            "step_s": [1.0, 1.0],
            "rollout_s": [0.5, 0.5],
        }

    return fake


@pytest.fixture
def fake_trainers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, E2EConfig]]:
    """`TRAINERS` replaced by two fake runs, one with a choice of rollout; no warm model.
    Each run appends ``(trainer, its config)`` to the returned list."""
    seen: list[tuple[str, E2EConfig]] = []
    trainers = {
        "plain": TrainerRun(_fake_run("plain", seen)),
        "choosy": TrainerRun(_fake_run("choosy", seen), rollouts=("stand_in", "engine")),
    }
    monkeypatch.setattr("parity.e2e.runs.TRAINERS", trainers)
    monkeypatch.setattr("parity.e2e.runs.warm_model_dir", lambda warm: tmp_path / "warm")
    return seen


def test_all_runs_every_registered_trainer_with_every_rollout_and_writes_each_result(
    fake_trainers: list[tuple[str, E2EConfig]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--trainer", "all", "--steps", "2", "--out", str(tmp_path / "out")]) == 0

    runs = [(name, cfg.rollout) for name, cfg in fake_trainers]
    assert runs == [("plain", None), ("choosy", "stand_in"), ("choosy", "engine")]
    results = {
        key: json.loads((tmp_path / "out" / f"{key}.json").read_text())
        for key in ("plain", "choosy", "choosy-engine")
    }
    assert [r["trainer"] for r in results.values()] == ["plain", "choosy", "choosy"]
    assert results["choosy-engine"]["rollout"] == "engine"
    printed = capsys.readouterr().out
    assert "| plain | 2 |" in printed
    assert "| choosy (stand_in) | 2 |" in printed
    assert "| choosy (engine) | 2 |" in printed


def test_the_rollout_goes_to_the_trainers_that_offer_a_choice(
    fake_trainers: list[tuple[str, E2EConfig]], tmp_path: Path
) -> None:
    main(["--trainer", "all", "--rollout", "engine", "--steps", "2", "--out", str(tmp_path)])

    assert [(name, cfg.rollout) for name, cfg in fake_trainers] == [
        ("plain", None),
        ("choosy", "engine"),
    ]
    assert json.loads((tmp_path / "choosy-engine.json").read_text())["rollout"] == "engine"


def test_a_rollout_for_a_trainer_without_a_choice_is_refused(
    fake_trainers: list[tuple[str, E2EConfig]], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit):
        main(["--trainer", "plain", "--rollout", "engine", "--out", str(tmp_path)])
    assert fake_trainers == []


def test_each_run_is_keyed_by_trainer_and_its_non_default_rollout(
    fake_trainers: list[tuple[str, E2EConfig]],
) -> None:
    assert runs_of("plain") == [("plain", None)]
    assert runs_of("plain", "engine") == [("plain", None)]  # no choice: its own
    assert runs_of("choosy") == [("choosy", None)]
    assert runs_of("choosy", "engine") == [("choosy-engine", "engine")]
    assert runs_of("choosy", every_rollout=True) == [
        ("choosy", "stand_in"),
        ("choosy-engine", "engine"),
    ]
    assert all_runs() == {
        "plain": ("plain", None),
        "choosy": ("choosy", "stand_in"),
        "choosy-engine": ("choosy", "engine"),
    }


def test_the_benchmark_covers_every_end_to_end_run() -> None:
    from parity import bench

    assert ("reference", *all_runs()) == bench.TRAINERS
    assert {"trl", "verl", "verl-vllm", "openrlhf"} <= set(bench.TRAINERS)


def test_verl_runs_with_the_harness_stand_in_or_its_own_vllm() -> None:
    assert TRAINERS["verl"].rollouts == ("hf_cpu", "vllm")
    assert TRAINERS["trl"].rollouts == ()
