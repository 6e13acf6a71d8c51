"""``recipes/train_trl.py --horizon-schedule``: the flag's turn caps by training step, and the
caps the recipe's rollout_func gives its episodes at steps 0, Δ and 2Δ (ScalingInter-RL)."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

from xpgym.recipe_args import parse_dataclass_args

ROOT = Path(__file__).resolve().parents[2]
ENV_ID = "world:Crafting-v0"  # its own limit (20 turns) is above every cap below
EVERY = 3


@pytest.fixture
def recipe(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """``recipes/train_trl.py`` as a module (its dataclass looks itself up in sys.modules)."""
    spec = importlib.util.spec_from_file_location("train_trl", ROOT / "recipes/train_trl.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "train_trl", module)
    spec.loader.exec_module(module)
    return module


def parse(recipe: types.ModuleType, *flags: str):
    return parse_dataclass_args(recipe.Args, "", ["--env-id", ENV_ID, *flags])


def test_flag_gives_each_cap_for_every_steps_then_the_last(recipe):
    args = parse(recipe, "--horizon-schedule", "5,10,15", "--horizon-every", "100")
    schedule = recipe.horizon_schedule(args)
    caps = {step: schedule(step) for step in (0, 99, 100, 199, 200, 10_000)}
    assert caps == {0: 5, 99: 5, 100: 10, 199: 10, 200: 15, 10_000: 15}


def test_without_the_flag_there_is_no_schedule(recipe):
    assert recipe.horizon_schedule(parse(recipe)) is None


@pytest.mark.parametrize(
    "flags",
    [
        ["--horizon-schedule", "5,x"],
        ["--horizon-schedule", "5,0,15"],
        ["--horizon-schedule", "5,,15"],
        ["--horizon-schedule", "5,10", "--horizon-every", "0"],
    ],
)
def test_bad_schedules_are_refused(recipe, flags):
    with pytest.raises(SystemExit, match="--horizon"):
        recipe.check_args(parse(recipe, *flags))


@pytest.fixture(scope="module")
def tiny() -> tuple[object, object]:
    """A tiny random model and its tokenizer (it never crafts the goal)."""
    pytest.importorskip("xpgym.adapters.trl", reason="needs trl", exc_type=ImportError)
    pytest.importorskip("transformers", reason="the tiny model needs transformers")
    import xpgym
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus

    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(ENV_ID), episodes=2))
    return tokenizer, build_tiny_model(tokenizer, seed=0)


def turns_played(recipe: types.ModuleType, args, tiny, step: int) -> list[int]:
    """Turns of two episodes the recipe's rollout_func plays at training step `step`, with
    a stand-in for TRL's trainer around the tiny model."""
    from xpgym.rollout.runner import make_tasks

    tokenizer, model = tiny
    trainer = types.SimpleNamespace(
        accelerator=types.SimpleNamespace(unwrap_model=lambda m: m, process_index=0),
        model=model,
        processing_class=tokenizer,
        temperature=1.0,
        max_completion_length=None,
        state=types.SimpleNamespace(global_step=step),
    )
    out = recipe.rollout_func(args)([t.to_json() for t in make_tasks(ENV_ID, 2)], trainer)
    # a turn is a run of policy tokens (env_mask 1) between observations (env_mask 0)
    return [
        sum(1 for j, m in enumerate(mask) if m and (j == 0 or not mask[j - 1]))
        for mask in out["env_mask"]
    ]


@pytest.mark.parametrize(("step", "cap"), [(0, 5), (EVERY - 1, 5), (EVERY, 10), (2 * EVERY, 15)])
def test_rollout_func_caps_episodes_by_the_training_step(recipe, tiny, step, cap):
    flags = ["--horizon-schedule", "5,10,15", "--horizon-every", str(EVERY)]
    args = parse(recipe, *flags, "--max-new-tokens", "2")
    assert turns_played(recipe, args, tiny, step) == [cap, cap]


def test_without_the_flag_max_turns_caps_every_step(recipe, tiny):
    args = parse(recipe, "--max-turns", "3", "--max-new-tokens", "2")
    assert turns_played(recipe, args, tiny, 2 * EVERY) == [3, 3]
