"""The main job (`recipes/train_torch.py`) runs end to end and writes what it promises."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the training recipe needs torch (the torch extra)")

ROOT = Path(__file__).resolve().parents[2]


def _recipe_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_torch", ROOT / "recipes/train_torch.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("train_torch", module)  # dataclasses look their module up there
    spec.loader.exec_module(sys.modules["train_torch"])
    return sys.modules["train_torch"]


def test_consistent_guesses_follows_the_feedback_interval():
    recipe = _recipe_module()
    higher, lower, win = "the number is higher than {}.", "the number is lower than {}.", "won"
    # 5 -> higher: 6..10 allowed; 8 ok -> lower: 6..7; 9 is outside.
    feedback = [higher.format(5), lower.format(8), lower.format(9), win]
    assert recipe.consistent_guesses([5, 8, 9, 6], feedback, 1, 10) == (2, 3)
    # Invalid turns count neither way and do not move the interval; turn 1 is never counted.
    assert recipe.consistent_guesses(
        [None, 3, None, 2], ["bad", lower.format(3), "bad", win], 1, 10
    ) == (2, 2)
    assert recipe.consistent_guesses([], [], 1, 10) == (0, 0)


def test_reference_policies_bracket_the_consistency_metric():
    recipe = _recipe_module()
    refs = recipe.reference_policies("game:GuessTheNumber-v0-easy", episodes=100, seed=7)
    assert refs["binary_search"]["success"] == 1.0
    assert refs["binary_search"]["consistent"] == 1.0
    assert 0.2 < refs["random_valid"]["consistent"] < 0.8  # ignores the feedback
    assert refs["random_valid"]["success"] < 0.6


@pytest.mark.parametrize("env_id", ["game:Wordle-v0", "game:GuessTheNumber-v0-random"])
def test_an_env_the_demo_cannot_train_is_refused_naming_the_ones_it_can(env_id, tmp_path):
    command = [
        sys.executable,
        "recipes/train_torch.py",
        "--env",
        env_id,
        "--out-dir",
        str(tmp_path),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"--env {env_id!r}" in result.stderr
    for trainable in _recipe_module().TRAINABLE_ENVS:
        assert trainable in result.stderr
    assert not list(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.parametrize("env_id", ["game:GuessTheNumber-v0", "game:GuessTheNumber-v0-hard"])
def test_the_demo_accepts_the_other_guess_the_number_sizes(env_id):
    recipe = _recipe_module()
    recipe.check_args(recipe.Args(env=env_id))  # no SystemExit


def test_every_env_the_demo_trains_has_one_number_range_its_tokenizer_spells():
    """What the warm start's guesser, the metrics and the reference policies assume."""
    import xpgym

    recipe = _recipe_module()
    for env_id in recipe.TRAINABLE_ENVS:
        env = xpgym.make(env_id)
        infos = [env.reset(seed=seed)[1] for seed in range(50)]
        ranges = {(info["min_number"], info["max_number"]) for info in infos}
        assert ranges == {recipe.number_range(env_id)}, env_id
        ((low, high),) = ranges
        assert 0 <= low < high <= recipe.MAX_NUMBER, env_id


TINY_RUN = (
    *("--episodes-per-step", "8", "--num-envs", "8", "--pretrain-steps", "2"),
    *("--pretrain-episodes-per-step", "4", "--eval-episodes", "4", "--eval-every", "2"),
)


def run_recipe(out_dir: Path, *extra: str) -> tuple[dict, list[dict]]:
    command = [sys.executable, "recipes/train_torch.py", *TINY_RUN, "--out-dir", str(out_dir)]
    result = subprocess.run(
        [*command, *extra], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]
    return json.loads((out_dir / "summary.json").read_text()), records


def test_the_recipe_writes_what_it_promises_and_two_runs_are_equal(tmp_path):
    """A run writes its metrics, summary, plot, episodes and tokenizer; a second run with the
    same arguments (the default fixed thread count) trains the same steps to the same
    numbers: only the timings differ."""
    (first, first_records), (second, second_records) = (
        run_recipe(tmp_path / name, "--steps", "2") for name in ("a", "b")
    )
    assert first["steps_trained"] == 2
    assert first["stopped_by"] == "steps"
    assert first["torch_threads"] == 2
    for phase in ("initial", "before", "after"):
        assert set(first[phase]) == {"greedy", "sampled"}
    assert first["initial"]["greedy"]["invalid_rate"] == 1.0  # an untrained model: no format
    assert first["references"]["binary_search"]["success"] == 1.0
    assert [r["step"] for r in first_records if r["kind"] == "train"] == [1, 2]
    assert (tmp_path / "a" / "reward_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "a" / "episodes.jsonl").stat().st_size > 0
    assert (tmp_path / "a" / "tokenizer").is_dir()

    def untimed(record: dict) -> dict:
        return {k: v for k, v in record.items() if not k.endswith("_s")}

    assert [untimed(r) for r in first_records] == [untimed(r) for r in second_records]
    assert first["after"] == second["after"]


def test_a_time_budget_stops_rl_early_and_says_so(tmp_path):
    summary, records = run_recipe(tmp_path, "--steps", "50", "--time-budget-s", "1")
    assert summary["stopped_by"] == "time budget"  # 1 s is spent before the first RL step
    assert summary["steps_trained"] == 1
    assert [r["step"] for r in records if r["kind"] == "train"] == [1]


def test_idle_cores_is_a_thread_count_between_one_and_four():
    assert 1 <= _recipe_module().idle_cores() <= 4


@pytest.mark.parametrize(
    "extra",
    [["--rollouts", "tree", "--algorithm", "tree"], ["--curriculum", "--curriculum-window", "4"]],
)
def test_tree_rollouts_and_the_curriculum_train_and_report_generated_tokens(extra, tmp_path):
    command = [
        sys.executable,
        "recipes/train_torch.py",
        *("--steps", "2", "--episodes-per-step", "8", "--pretrain-steps", "2"),
        *("--pretrain-episodes-per-step", "4", "--eval-episodes", "4", "--eval-every", "2"),
        *("--threads", "1", "--out-dir", str(tmp_path), *extra),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert summary["episodes_trained"] == sum(r["num_episodes"] for r in train)
    assert summary["tokens_generated"] > 0
    assert all(r["tokens_per_episode"] > 0 for r in train)
    if "--curriculum" in extra:
        assert all("curriculum/game:GuessTheNumber-v0/level" in r for r in train)
    else:  # one tree of at most 8 episodes per step
        assert all(2 <= r["num_episodes"] <= 8 for r in train)


def test_tree_advantages_need_tree_rollouts():
    recipe = _recipe_module()
    with pytest.raises(SystemExit, match="--rollouts tree"):
        recipe.check_args(recipe.Args(algorithm="tree"))
    recipe.check_args(recipe.Args(algorithm="tree", rollouts="tree"))  # no SystemExit


@pytest.mark.parametrize(
    ("idle", "user_policy", "restarts"), [(1, None, True), (2, None, False), (1, "ACTIVE", False)]
)
def test_a_busy_machine_restarts_the_job_with_passive_openmp_waits(
    monkeypatch, idle, user_policy, restarts
):
    recipe = _recipe_module()
    calls = []
    monkeypatch.setattr(recipe, "idle_cores", lambda: idle)
    monkeypatch.setattr(recipe.os, "execv", lambda *args: calls.append(args))
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    if user_policy is not None:
        monkeypatch.setenv("OMP_WAIT_POLICY", user_policy)
    recipe.restart_with_passive_waits_if_busy(2)
    assert bool(calls) is restarts
    if restarts:
        assert calls == [(sys.executable, [sys.executable, *sys.argv])]
        assert recipe.os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    else:
        assert recipe.os.environ.get("OMP_WAIT_POLICY") == user_policy
