"""verl's real V1 trainer end to end on CPU (`parity.e2e_verl`, harness `parity.verl_cpu`)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip(
    "xpgym.adapters.verl", reason="needs verl 0.9.x (the verl extra)", exc_type=ImportError
)

from parity import verl_cpu
from parity.e2e_verl import run_verl

ENV_ID = "game:GuessTheNumber-v0-easy"
STEPS = 2
PROB_GAP_BOUND = 1e-4
"""Sampler vs trainer: both compute in float32 on the same synced weights, so they agree to
float rounding (measured ~1e-6); one step of stale weights (no sync) is far above this."""


@pytest.fixture(scope="session")
def warm_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model after 40 warm-start steps (non-zero advantages), saved with its tokenizer."""
    import torch

    import xpgym
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.reference.warm_start import CORPUS_SEED, RandomValidGuesser, number_range, pretrain

    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(ENV_ID), episodes=50, seed=CORPUS_SEED))
    model = build_tiny_model(tokenizer, seed=0)
    guesser = RandomValidGuesser(tokenizer, *number_range(ENV_ID), seed=0)
    vec = xpgym.make_vec(ENV_ID, 8)
    with torch.random.fork_rng(devices=[]):
        try:
            pretrain(model, tokenizer, vec, guesser, steps=40, episodes_per_step=16, lr=2e-3)
        finally:
            vec.close()
    path = tmp_path_factory.mktemp("verl_warm")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_verl_trains_end_to_end_on_cpu(warm_model_dir: Path, tmp_path: Path) -> None:
    result = run_verl(STEPS, tmp_path, warm_model_dir)

    assert result["steps_completed"] == STEPS
    assert (tmp_path / "verl.json").exists()
    assert all(tokens > 0 for tokens in result["policy_tokens"]), result["policy_tokens"]
    assert result["all_params_changed"], result["params_unchanged"]
    for key in ("loss", "grad_norm", "step_s", "rollout_s", "update_s"):
        assert len(result[key]) == STEPS, key
        assert all(math.isfinite(v) for v in result[key]), (key, result[key])
    assert result["max_prob_gap"] < PROB_GAP_BOUND, result["max_prob_gap"]
    assert result["max_sequence_logprob_gap"] < PROB_GAP_BOUND, result
    assert result["versions"] == verl_cpu.PINS


def test_a_version_outside_the_pins_fails_with_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(verl_cpu.PINS, "verl", "0.0.0")
    with pytest.raises(RuntimeError, match=r"verl==0\.0\.0 \(found "):
        verl_cpu.check_versions()
    with pytest.raises(RuntimeError, match="pinned"):
        run_verl(1, Path("/nonexistent"), Path("/nonexistent"))
