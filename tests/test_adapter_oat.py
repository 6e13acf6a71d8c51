"""Oat adapter: TransitionData / Transition layout, the learner's ReBN, the engine policy.

Oat's actor and learner classes import vLLM, DeepSpeed and launchpad at module level, so
on CPU only ``oat.types`` is real here; the hooks' logic that runs anywhere (the ReBN of
the learner, the engine policy the actor drives) is tested on its own.
"""

from __future__ import annotations

import importlib
import threading
import types
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "xpgym.adapters.oat", reason="needs oat-llm 0.2.x (the oat extra)", exc_type=ImportError
)
torch = pytest.importorskip("torch")

from adapter_cases import (  # noqa: E402
    GAMMA,
    TURN_RETURNS,
    TURN_REWARDS,
    episodes,
    rebn_reference,
)
from oat.types import Transition, TransitionData  # noqa: E402

from xpgym.adapters.oat import (  # noqa: E402
    OatEnginePolicy,
    batch_normalize,
    oat_classes,
    to_transition_data,
    to_transitions,
)


def test_one_transition_per_turn_with_the_return_on_its_last_token() -> None:
    eps = episodes()
    data = to_transition_data(eps, gamma=GAMMA)
    assert all(isinstance(d, TransitionData) for d in data)
    turns = [turn for ep in eps for turn in ep.turns]
    assert len(data) == len(turns) == 7
    returns = [g for ep in TURN_RETURNS for g in ep]
    for d, turn, g in zip(data, turns, returns, strict=True):
        assert d.prompt_ids == turn.prompt_ids
        assert d.response_ids == turn.response_ids
        assert d.response_logprobs == turn.response_logprobs
        assert d.rewards[:-1] == [0.0] * (len(turn.response_ids) - 1)
        assert d.rewards[-1] == pytest.approx(g, abs=1e-12)
        assert d.loss_mask is True
    assert [(d.info["episode"], d.info["turn"]) for d in data] == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 0),
        (3, 0),
    ]


def test_ignore_no_eos_masks_cut_generations() -> None:
    eps = episodes()
    eps[0].turns[0].info["generation_truncated"] = True
    masks = [d.loss_mask for d in to_transition_data(eps, gamma=GAMMA, ignore_no_eos=True)]
    assert masks == [False] + [True] * 6
    assert all(d.loss_mask for d in to_transition_data(eps, gamma=GAMMA))


def test_multi_turn_transitions_carry_turn_rewards_and_done() -> None:
    eps = episodes()
    eps[1].turns[0].info["invalid_action"] = True
    lists = to_transitions(eps)
    assert all(isinstance(t, Transition) for ts in lists for t in ts)
    assert [[t.rewards for t in ts] for ts in lists] == TURN_REWARDS
    assert [[t.done for t in ts] for ts in lists] == [
        [False, True],
        [False, False, True],
        [True],
        [True],
    ]
    assert [t.action_is_formatted for t in lists[1]] == [False, True, True]


def test_learner_rebn_on_row_sums_equals_the_reference() -> None:
    """Oat's learner sums each row's rewards (G_t) then calls the advantage hook."""
    rows = to_transition_data(episodes(), gamma=GAMMA)
    sums = torch.tensor([sum(d.rewards) for d in rows], dtype=torch.float32)
    expected = [a for ep in rebn_reference() for a in ep]
    np.testing.assert_allclose(batch_normalize(sums).numpy(), expected, atol=1e-6)


def test_batch_normalize_across_ranks_equals_one_batch() -> None:
    values = torch.tensor([0.9, 1.0, 0.095, -0.45, -0.5, 2.0, 0.0], dtype=torch.float64)
    shards = [values[:3], values[3:]]  # two learner ranks
    barrier, pending, results = threading.Barrier(2), [], [None, None]

    def all_reduce(t: torch.Tensor) -> torch.Tensor:
        pending.append(t)
        barrier.wait()
        total = sum(pending[-2:])
        barrier.wait()
        if threading.current_thread().name == "rank-0":
            pending.clear()
        barrier.wait()
        return total

    def rank(i: int) -> None:
        results[i] = batch_normalize(shards[i], all_reduce=all_reduce)

    threads = [threading.Thread(target=rank, args=(i,), name=f"rank-{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_allclose(
        torch.cat(results).numpy(), batch_normalize(values).numpy(), atol=1e-12
    )
    flat = values.numpy()
    np.testing.assert_allclose(
        batch_normalize(values).numpy(), (flat - flat.mean()) / (flat.std() + 1e-9), atol=1e-12
    )


class ScriptedLLM:
    """Oat's ``ActorBase.generate(prompt_token_ids, sampling_params)``, vLLM-shaped outputs."""

    def __init__(self, tokenizer: Any, text: str) -> None:
        self.tokenizer, self.text, self.calls = tokenizer, text, 0

    def __call__(self, prompts: list[list[int]], sampling_params: Any) -> list[Any]:
        self.calls += 1
        ids = [
            *self.tokenizer.encode(self.text, add_special_tokens=False),
            self.tokenizer.eos_token_id,
        ]
        steps = [{t: types.SimpleNamespace(logprob=-0.5)} for t in ids]
        completion = types.SimpleNamespace(token_ids=ids, finish_reason="stop", logprobs=steps)
        return [types.SimpleNamespace(outputs=[completion], prompt_token_ids=p) for p in prompts]


def test_engine_policy_drives_the_collector_and_converts() -> None:
    import xpgym
    from xpgym.core.rollout import RolloutCollector

    tiny_lm = importlib.import_module("tiny_lm")
    tokenizer = tiny_lm.tiny_tokenizer()
    llm = ScriptedLLM(tokenizer, "\\boxed{0}")
    policy = OatEnginePolicy(llm, types.SimpleNamespace(max_tokens=64), tokenizer)
    vec = xpgym.make_vec("game:GuessTheNumber-v0-easy", 2)
    episodes_ = RolloutCollector(vec, policy, max_turns=2).collect(2, seed=0)
    vec.close()
    assert all(len(ep.turns) == 2 for ep in episodes_)
    assert all(turn.action == "\\boxed{0}" for ep in episodes_ for turn in ep.turns)
    data = to_transition_data(episodes_, gamma=GAMMA, tokenizer=tokenizer)
    assert data[0].prompt.startswith("<|im_start|>user\n")
    assert data[1].prompt_ids[: len(data[0].prompt_ids) + len(data[0].response_ids)] == (
        data[0].prompt_ids + data[0].response_ids
    )
    assert data[0].response_logprobs == [-0.5] * len(data[0].response_ids)


def test_actor_and_learner_need_oats_gpu_stack() -> None:
    try:
        importlib.import_module("oat.algorithms.ppo")
    except ImportError:
        with pytest.raises(ImportError, match=r"xpgym\[oat\]"):
            oat_classes()
    else:  # a GPU install: the classes build
        args_cls, actor_cls, learner_cls = oat_classes()
        assert args_cls().gamma == 0.9
        assert {"step"} <= set(vars(actor_cls))
        assert {"compute_monte_carlo_advantages", "prepare_data"} <= set(vars(learner_cls))
