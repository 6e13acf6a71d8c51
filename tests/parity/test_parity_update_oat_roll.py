"""Layer 3 runners for Oat and ROLL: each trainer's own update on xpgym's converted batch."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from parity.shared.trainer_code import NotRunnableError, roll_importable
from parity.update.job import TrainerRun, UpdateJob
from xpgym.core.trajectory import Episode

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def episodes(warm_model: Path) -> list[Episode]:
    """8 episodes of the warm model on GuessTheNumber, with the sampler's log-probs."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import xpgym
    from xpgym.rollout.collector import RolloutCollector
    from xpgym.rollout.policies.hf import HFPolicy

    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(warm_model)
    model = AutoModelForCausalLM.from_pretrained(warm_model)
    policy = HFPolicy(model, tokenizer, max_new_tokens=6, seed=0)
    vec = xpgym.make_vec("game:GuessTheNumber-v0-easy", 4)
    try:
        return RolloutCollector(vec, policy).collect(8, seed=0)
    finally:
        vec.close()


def _sampler_gap(metrics: dict[str, float]) -> float:
    return max(
        abs(metrics["sampler_learner_prob_diff_max"]), abs(metrics["sampler_learner_prob_diff_min"])
    )


def _changed(run: TrainerRun, warm_model: Path) -> None:
    """Two finite steps, each moving the parameters."""
    import torch
    from transformers import AutoModelForCausalLM

    start = dict(AutoModelForCausalLM.from_pretrained(warm_model).named_parameters())
    assert len(run.steps) == 2
    previous = {name: p.detach() for name, p in start.items()}
    for step in run.steps:
        assert torch.isfinite(torch.tensor(step.loss))
        assert step.grad_norm > 0
        assert step.params.keys() == start.keys()
        assert any(not torch.equal(step.params[n], previous[n]) for n in previous)
        previous = step.params


def test_micro_batch_divides_the_rows() -> None:
    from parity.update.oat import _micro_batch

    assert _micro_batch(29, 4) == 1
    assert _micro_batch(12, 4) == 4
    assert _micro_batch(18, 4) == 3
    assert _micro_batch(2, 4) == 2


@pytest.mark.timeout(600)  # the session's warm model is built by the first test that needs it
def test_oat_learning_step_trains_on_xpgym_rows(warm_model: Path, episodes: list[Episode]) -> None:
    pytest.importorskip("oat.types", reason="needs oat-llm")
    from parity.update import oat

    run, metrics = oat.learning_steps(UpdateJob(model_dir=warm_model, episodes=episodes, steps=2))
    _changed(run, warm_model)
    assert "vllm" in run.stand_ins or importlib.util.find_spec("vllm") is not None
    # The rows put the sampler's log-probs where Oat's learner reads its own (response_masks
    # = completion mask [:, 1:]): before any update they agree to float precision.
    assert _sampler_gap(metrics[0]) < 1e-5
    assert abs(metrics[0]["kl_sample_train_v1"]) < 1e-6
    # One optimizer step per learning_step: the ratio's old log-probs are the learner's own
    # at the step's start, so Oat's logprobs_diff is 0 and only the sampler gap grows.
    assert all(m["logprobs_diff_max"] == m["logprobs_diff_min"] == 0 for m in metrics)
    assert _sampler_gap(metrics[1]) > 1e-4


@pytest.mark.timeout(600)
def test_oat_logprobs_diff_is_the_drift_within_a_step(
    warm_model: Path, episodes: list[Episode]
) -> None:
    """Stepping the optimizer after every micro-batch (no accumulation) gives Oat's
    logprobs_diff of order 1 on the same rows whose sampler log-probs match: the metric
    compares the learner with itself at the step's start, not with the sampler."""
    pytest.importorskip("oat.types", reason="needs oat-llm")
    from parity.update import oat

    job = UpdateJob(model_dir=warm_model, episodes=episodes, steps=1)
    _, (metrics,) = oat.learning_steps(job, accumulate=False)
    assert _sampler_gap(metrics) < 1e-5
    assert max(metrics["logprobs_diff_max"], -metrics["logprobs_diff_min"]) > 0.1


@pytest.mark.timeout(600)
def test_oat_check_sees_misplaced_sampler_logprobs(
    warm_model: Path, episodes: list[Episode]
) -> None:
    """The sampler-learner check fails when the rows' log-probs are one token off."""
    pytest.importorskip("oat.types", reason="needs oat-llm")
    from parity.update import oat

    shifted = []
    for episode in episodes:
        turns = []
        for turn in episode.turns:
            lps = list(turn.response_logprobs)
            turns.append(dataclasses.replace(turn, response_logprobs=lps[1:] + lps[:1]))
        shifted.append(dataclasses.replace(episode, turns=turns))
    _, (metrics,) = oat.learning_steps(UpdateJob(model_dir=warm_model, episodes=shifted, steps=1))
    assert _sampler_gap(metrics) > 1e-2


def test_roll_says_how_to_run_it_when_roll_is_missing() -> None:
    from parity.update import roll

    if roll_importable():
        pytest.skip("ROLL imports here; test_roll_loss_func_trains_on_xpgym_rows runs it")
    with pytest.raises(NotRunnableError, match="ROLL is git-only: put a checkout on PYTHONPATH"):
        roll.run(UpdateJob(model_dir=Path("unused"), episodes=[], steps=2))


@pytest.mark.timeout(600)
def test_roll_loss_func_trains_on_xpgym_rows(warm_model: Path, episodes: list[Episode]) -> None:
    from parity.update import roll

    if not roll_importable():
        pytest.skip("needs a ROLL checkout on PYTHONPATH (ROLL is git-only)")
    run = roll.run(UpdateJob(model_dir=warm_model, episodes=episodes, steps=2))
    _changed(run, warm_model)
