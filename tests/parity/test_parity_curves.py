"""Parity suite, layer 2: learning curves against the reference's seed-to-seed band.

One very small run (a smaller model than the demo's, 10 steps of 32 episodes, 4 reference
seeds, RL2's estimator and the planted sign flip; ~30 s on 2 cores) checks the report's
structure, that each reference seed stays inside the band of the other seeds, and that the
sign flip leaves it. The trainer extension point the curves use (`Trainer(advantage_fn=)`)
and the placement of a trainer's per-token values on the rows are checked on real episodes
of the same run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the curves train with torch (the torch extra)")
pytest.importorskip("transformers", reason="the tiny model is a transformers model")

from parity.curves.cpu import PLANTED, VARIANTS, CurveConfig, run, token_advantages  # noqa: E402
from parity.shared.curves import smooth  # noqa: E402
from parity.tokens.core import reference_tokens  # noqa: E402

SMALL = CurveConfig(
    hidden_size=64,
    num_layers=1,
    pretrain_steps=60,
    pretrain_episodes=16,
    pretrain_lr=3e-3,
    steps=10,
    episodes=32,
    lr=5e-4,
    seeds=4,
    window=3,
)
SIGN_FLIP = PLANTED[0]

# The module's training runs take ~25 s on an idle 2-core machine and several times that on a
# busy one; the suite's 120 s per-test limit is a hang guard, so it gets more room here.
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("curves")


@pytest.fixture(scope="module")
def report(out_dir: Path) -> dict[str, Any]:
    rl2 = [v for v in VARIANTS if v.name == "rl2"]
    return run(SMALL, out_dir, rl2, [SIGN_FLIP], jobs=2)


def test_report_structure(report: dict[str, Any], out_dir: Path) -> None:
    if "not_runnable" in report["trainers"]["rl2"]:  # its extra is optional
        pytest.skip(f"needs the rl2 trainer: {report['trainers']['rl2']['not_runnable']}")
    assert report["config"]["steps"] == SMALL.steps
    assert set(report) >= {"config", "metric", "start_weights", "band", "reference"}
    assert list(report["reference"]) == ["0", "1", "2", "3"]
    low, high, mean = (np.array(report["band"][k]) for k in ("low", "high", "mean"))
    assert low.shape == high.shape == mean.shape == (SMALL.steps,)
    curves = np.array([ref["curve"] for ref in report["reference"].values()])
    half = np.maximum(SMALL.k * curves.std(axis=0, ddof=1), SMALL.floor)
    np.testing.assert_allclose(mean, curves.mean(axis=0))
    np.testing.assert_allclose(high - mean, half)
    np.testing.assert_allclose(mean - low, half)
    for entry in (*report["reference"].values(), *report["trainers"].values()):
        assert len(entry["raw"]) == len(entry["curve"]) == SMALL.steps
        np.testing.assert_allclose(entry["curve"], smooth(entry["raw"], SMALL.window))
        assert all(-0.4 - 1e-9 <= r <= 1.0 + 1e-9 for r in entry["raw"])  # the env's range
    rl2 = report["trainers"]["rl2"]
    assert rl2["code"] == "reinforce, global_norm, norm_var"
    assert rl2["verdict"] in ("inside", "outside")
    assert rl2["verdict"] == ("inside" if rl2["inside"] >= SMALL.min_inside else "outside")
    # every run starts from the same weights and seed 0 samples the same first batch
    assert rl2["raw"][0] == report["reference"]["0"]["raw"][0]
    assert report["planted"][SIGN_FLIP.name]["raw"][0] == report["reference"]["0"]["raw"][0]
    assert list(out_dir.glob("start_weights-*.pt"))


def test_reference_seeds_sit_inside_the_band_of_the_others(report: dict[str, Any]) -> None:
    loo = [ref["inside_loo"] for ref in report["reference"].values()]
    assert min(loo) >= 0.5, loo
    assert np.mean(loo) >= SMALL.min_inside, loo


def test_a_sign_flip_leaves_the_band(report: dict[str, Any]) -> None:
    flipped = report["planted"][SIGN_FLIP.name]
    assert flipped["verdict"] == "outside", flipped["inside"]
    loo = [ref["inside_loo"] for ref in report["reference"].values()]
    assert flipped["inside"] < min(loo)
    # it falls below the band: the policy learns to lose (all invalid answers: -0.4)
    assert flipped["curve"][-1] < report["band"]["low"][-1]


def test_rerun_reuses_the_cached_start_weights(out_dir: Path, report: dict[str, Any]) -> None:
    assert report["start_weights"]["cached"] is False
    again = run(replace(SMALL, steps=1, seeds=2), out_dir, (), (), jobs=1)
    assert again["start_weights"]["cached"] is True
    assert again["reference"]["0"]["raw"][0] == report["reference"]["0"]["raw"][0]


# -- the extension point and the placement of per-token values, on real episodes ----------


@pytest.fixture(scope="module")
def trained_setup(out_dir: Path, report: dict[str, Any]) -> tuple[Any, Any, list[Any]]:
    import xpgym
    from parity.shared.warm_model import tokenizer_and_model
    from xpgym.rollout.collector import RolloutCollector
    from xpgym.rollout.policies.hf import HFPolicy

    tokenizer, model = tokenizer_and_model(SMALL)
    (weights,) = out_dir.glob("start_weights-*.pt")
    model.load_state_dict(torch.load(weights, weights_only=True))
    policy = HFPolicy(model, tokenizer, max_new_tokens=6, top_p=1.0, top_k=0, seed=3)
    vec = xpgym.make_vec(SMALL.env, 4)
    try:
        episodes = RolloutCollector(vec, policy).collect(6, seed=11)
    finally:
        vec.close()
    assert any(len(ep.turns) > 1 for ep in episodes)  # multi-turn rows are exercised
    return tokenizer, model, episodes


@pytest.mark.parametrize("layout", ["per_episode", "per_turn"])
def test_per_token_values_land_on_the_reference_positions(
    trained_setup: tuple[Any, Any, list[Any]], layout: str
) -> None:
    """The reference's own values, given per token as the parity estimators give them and
    placed by `token_advantages` through `advantage_fn`, are the reference's batch."""
    from xpgym.reference.trainer import Trainer, TrainerConfig

    tokenizer, model, episodes = trained_setup
    cfg = TrainerConfig(algorithm="rebn", layout=layout, gamma=0.9, num_episodes=6)  # type: ignore[arg-type]
    plain = Trainer(model, cfg, pad_token_id=tokenizer.pad_token_id).make_batch(episodes)
    swapped = Trainer(
        model,
        cfg,
        pad_token_id=tokenizer.pad_token_id,
        advantage_fn=lambda b: token_advantages(b, reference_tokens("rebn", b.episodes, 0.9)),
    ).make_batch(episodes)
    assert plain.advantages.abs().sum() > 0
    torch.testing.assert_close(swapped.advantages, plain.advantages, atol=1e-6, rtol=0)
    flipped = Trainer(
        model, cfg, pad_token_id=tokenizer.pad_token_id, advantage_fn=lambda b: -b.advantages
    ).make_batch(episodes)
    torch.testing.assert_close(flipped.advantages, -plain.advantages)
    np.testing.assert_array_equal(flipped.turn_advantages, plain.turn_advantages)


def test_misplaced_values_and_wrong_shapes_raise(trained_setup: tuple[Any, Any, list[Any]]) -> None:
    from xpgym.reference.trainer import Trainer, TrainerConfig

    tokenizer, model, episodes = trained_setup
    cfg = TrainerConfig(algorithm="rebn", num_episodes=6)
    batch = Trainer(model, cfg, pad_token_id=tokenizer.pad_token_id).make_batch(episodes)
    values = reference_tokens("rebn", batch.episodes, 1.0)
    assert token_advantages(batch, values).shape == batch.advantages.shape
    with pytest.raises(ValueError, match="placed per episode"):
        token_advantages(batch, [np.append(v, 0.0) for v in values])  # one value too many
    with pytest.raises(ValueError, match="not episode"):
        token_advantages(batch, [v[:-1] for v in values])  # one value short
    bad = Trainer(model, cfg, pad_token_id=tokenizer.pad_token_id, advantage_fn=lambda b: [0.0])
    with pytest.raises(ValueError, match="shape"):
        bad.make_batch(episodes)
