"""RL2 (rl-square 0.0.2) adapter: tensor dict, RL2's own helpers and advantages, env module.

``RL2.utils.algorithms`` imports ``wandb`` for logging only; where wandb is missing the
`rl2_algorithms` fixture imports it with a test-only empty stand-in and removes every module
it imported afterwards. ``RL2.trainer.ppo`` needs SGLang and flash-attn (GPU), so the
override's routing is checked against a test-only stand-in of that module.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.machinery
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "xpgym.adapters.rl2", reason="needs rl-square 0.0.2 (the rl2 extra)", exc_type=ImportError
)
pytest.importorskip("RL2.datasets", reason="RL2's datasets module needs datasets and torchdata")
torch = pytest.importorskip("torch")

from adapter_cases import (  # noqa: E402
    GAMMA,
    GROUPS,
    PROMPTS,
    RESPONSE_MASKS,
    RESPONSES,
    REWARD_POSITIONS,
    SCORES,
    TURN_REWARDS,
    episodes,
    rebn_reference,
    with_failed_member,
)
from omegaconf import OmegaConf  # noqa: E402
from RL2.datasets import pack_tensor_dicts, state_dict_to_tensor_dict  # noqa: E402

import xpgym  # noqa: E402
from parity.shared.trainer_code import stand_ins  # noqa: E402
from xpgym.adapters import rl2  # noqa: E402
from xpgym.adapters.rl2 import (  # noqa: E402
    install_turn_advantages,
    make_extra_info,
    reinforce_without_failed,
    reset,
    step,
    to_tensor_dict,
    turn_advantages,
)
from xpgym.core import registry  # noqa: E402
from xpgym.rollout.runner import make_tasks  # noqa: E402
from xpgym.training.advantages import grpo  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def rl2_algorithms() -> Iterator[Any]:
    # wandb (RL2 logs with it) gets an empty stand-in where missing; afterwards only the
    # stand-in and RL2's modules are removed (torch internals break when imported twice).
    with stand_ins(["wandb"], packages=("RL2",)):
        yield importlib.import_module("RL2.utils.algorithms")


def rl2_state_dict(b: int) -> dict[str, list]:
    """Episode b's state dict as RL2 0.0.2's rollout accumulates it (by hand)."""
    tokens = PROMPTS[b] + RESPONSES[b]
    mask = [0] * len(PROMPTS[b]) + RESPONSE_MASKS[b]
    rewards = [0.0] * len(tokens)
    for position, reward in zip(REWARD_POSITIONS[b], TURN_REWARDS[b], strict=True):
        rewards[len(PROMPTS[b]) + position] = reward
    return {
        "states": tokens,
        "actions": [t if m else 0 for t, m in zip(tokens, mask, strict=True)],
        "action_mask": mask,
        "logps": [-t / 100 if m else 0.0 for t, m in zip(tokens, mask, strict=True)],
        "rewards": rewards,
    }


# --------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------


def test_tensor_dict_equals_rl2s_own_packing() -> None:
    ours, cu_seqs = to_tensor_dict(episodes())
    theirs = pack_tensor_dicts([state_dict_to_tensor_dict(rl2_state_dict(b)) for b in range(4)])
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert ours[key].dtype == theirs[key].dtype, key
        np.testing.assert_allclose(ours[key].numpy(), theirs[key].numpy(), atol=1e-7, err_msg=key)
    assert cu_seqs.tolist() == [0, 1, 2, 3, 4]


def test_tensor_dict_is_shifted_by_one_token() -> None:
    tensor_dict, _ = to_tensor_dict(episodes())
    # episode A: tokens 1 2 3 10 11 4 5 12 13 14 (n = 10), states are tokens 0..8
    assert tensor_dict["states"][0].tolist() == [1, 2, 3, 10, 11, 4, 5, 12, 13, 0]
    assert tensor_dict["actions"][0].tolist() == [0, 0, 10, 11, 0, 0, 12, 13, 14, 0]
    assert tensor_dict["action_mask"][0].tolist() == [0, 0, 1, 1, 0, 0, 1, 1, 1, 0]
    assert tensor_dict["eos_mask"][0].tolist() == [0] * 8 + [1, 0]
    assert tensor_dict["rewards"][0].tolist() == [0, 0, 0, 0.0, 0, 0, 0, 0, 1.0, 0]


def test_a_re_rendered_history_splits_the_episode_into_sequences() -> None:
    eps = episodes()
    eps[1].turns[2].prompt_ids = [1, 2, 3, 99, 21, 22, 7]
    tensor_dict, cu_seqs = to_tensor_dict(eps)
    assert cu_seqs.tolist() == [0, 1, 3, 4, 5]
    assert len(tensor_dict["states"]) == 5
    assert tensor_dict["rewards"][1:3].sum().item() == pytest.approx(sum(TURN_REWARDS[1]))


# --------------------------------------------------------------------------------------
# RL2's advantage code on converted batches, and the override
# --------------------------------------------------------------------------------------


def rl2_config(**kwargs: Any) -> Any:
    base = {"estimator": "reinforce", "gamma": 1.0, "lamda": 1.0, "responses_per_prompt": 2}
    return OmegaConf.create({**base, "global_norm": False, "norm_var": True, **kwargs})


def row_values(tensor_dict: dict[str, Any]) -> np.ndarray:
    adv, mask = tensor_dict["advantages"].numpy(), tensor_dict["action_mask"].numpy() == 1
    for b in range(len(adv)):
        assert np.allclose(adv[b][mask[b]], adv[b][mask[b]][0], atol=1e-6)
        assert not adv[b][~mask[b]].any()
    return np.array([adv[b][mask[b]][0] for b in range(len(adv))])


def test_rl2_grouped_reinforce_equals_grpo_with_float32_eps(rl2_algorithms: Any) -> None:
    tensor_dict, cu_seqs = to_tensor_dict(episodes())
    rl2_algorithms.compute_advantages.__wrapped__(rl2_config(), tensor_dict, cu_seqs, step=0)
    np.testing.assert_allclose(row_values(tensor_dict), grpo(SCORES, GROUPS, eps=EPS32), atol=1e-6)


def test_rl2_global_norm_is_one_group(rl2_algorithms: Any) -> None:
    tensor_dict, cu_seqs = to_tensor_dict(episodes())
    config = rl2_config(global_norm=True)
    rl2_algorithms.compute_advantages.__wrapped__(config, tensor_dict, cu_seqs, step=0)
    np.testing.assert_allclose(
        row_values(tensor_dict), grpo(SCORES, [0, 0, 0, 0], eps=EPS32), atol=1e-6
    )


@pytest.mark.parametrize("split", [False, True])
def test_turn_advantages_equal_reference_rebn(split: bool) -> None:
    eps = episodes()
    if split:
        eps[1].turns[2].prompt_ids = [1, 2, 3, 99, 21, 22, 7]
    tensor_dict, cu_seqs = to_tensor_dict(eps)
    turn_advantages(
        OmegaConf.create({"estimator": "xpgym_rebn", "gamma": GAMMA}), tensor_dict, cu_seqs
    )
    # each turn's advantage on its action positions, in trajectory order
    got, mask = tensor_dict["advantages"].numpy(), tensor_dict["action_mask"].numpy()
    firsts = [
        (r, j)
        for r in range(len(mask))
        for j in range(mask.shape[1])
        if mask[r, j] and (j == 0 or not mask[r, j - 1])
    ]
    expected = [a for ep in rebn_reference() for a in ep]
    np.testing.assert_allclose([got[r, j] for r, j in firsts], expected, atol=1e-6)


def test_install_routes_only_xpgym_estimators(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    stand_in = types.ModuleType("RL2.trainer.ppo")  # test-only: the real one needs SGLang
    stand_in.compute_advantages = lambda config, td, cu, step: calls.append(config.estimator)
    trainer_pkg = types.ModuleType("RL2.trainer")
    trainer_pkg.ppo = stand_in
    monkeypatch.setitem(sys.modules, "RL2.trainer", trainer_pkg)
    monkeypatch.setitem(sys.modules, "RL2.trainer.ppo", stand_in)
    install_turn_advantages()
    install_turn_advantages()  # idempotent
    tensor_dict, cu_seqs = to_tensor_dict(episodes())
    stand_in.compute_advantages(
        OmegaConf.create({"estimator": "reinforce"}), tensor_dict, cu_seqs, 0
    )
    assert calls == ["reinforce"]
    stand_in.compute_advantages(
        OmegaConf.create({"estimator": "xpgym_reinforce", "gamma": 1.0}), tensor_dict, cu_seqs, 0
    )
    assert calls == ["reinforce"]
    assert "advantages" in tensor_dict


# --------------------------------------------------------------------------------------
# The env module, driven the way RL2 0.0.2's rollout drives it
# --------------------------------------------------------------------------------------


TINY = {"tokenizer": "tiny", "max_turns": 3}


@pytest.fixture
def tokenizer(monkeypatch: pytest.MonkeyPatch) -> Any:
    from random_byte_lm import tiny_tokenizer

    tok = tiny_tokenizer()
    monkeypatch.setitem(rl2._TOKENIZERS, "tiny", tok)
    return tok


def play_like_rl2(
    tokenizer: Any,
    actions: list[str],
    max_turns: int,
    env_id: str = "game:GuessTheNumber-v0-easy",
) -> tuple[list[str], list[dict]]:
    """RL2 0.0.2's ``Rollout.rollout`` loop (texts only), with scripted actions."""

    async def run() -> tuple[list[str], list[dict]]:
        task = make_tasks(env_id, 1, seed=0)[0]
        extra_info = make_extra_info(task, tokenizer="tiny", max_turns=max_turns)
        state_text, extra_info = await reset(extra_info)
        texts, responses = [state_text], []
        for action in actions:
            response = await step(state_text, action, extra_info)
            responses.append(response)
            if response["done"]:
                break
            assert response["next_state"].startswith(state_text + action)  # one sequence
            state_text = response["next_state"]
            texts.append(state_text)
            extra_info = response["extra_info"]
        return texts, responses

    return asyncio.run(run())


def test_env_module_extends_state_and_action_with_the_next_message(tokenizer: Any) -> None:
    action = "\\boxed{0}<|im_end|>"
    texts, responses = play_like_rl2(tokenizer, [action] * 3, max_turns=3)
    assert texts[0].startswith("<|im_start|>user\nGuess the number")
    assert texts[0].endswith("<|im_start|>assistant\n")
    delta = texts[1][len(texts[0] + action) :]
    assert delta.startswith("\n<|im_start|>user\n")  # only the "\n" of the end of turn was missing
    assert delta.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert [r["done"] for r in responses] == [False, False, True]
    assert all(r["reward"] == r["score"] for r in responses)


def test_env_module_ends_at_max_turns_and_frees_the_env(tokenizer: Any) -> None:
    in_play = len(rl2._EPISODES)
    _, responses = play_like_rl2(tokenizer, ["\\boxed{0}<|im_end|>"] * 5, max_turns=2)
    assert len(responses) == 2
    assert responses[-1]["done"]
    assert len(rl2._EPISODES) == in_play  # no episode left behind


def drop_like_rl2(
    tokenizer: Any, steps: int, *, raise_after: bool = False
) -> tuple[Any, dict[str, Any]]:
    """RL2 0.0.2's ``Rollout.__call__`` on one sample whose rollout stops calling ``step``
    before the episode ends: RL2's own ``rollout.max_turns`` (`steps`) came first, or (with
    `raise_after`) RL2 raised after the last step. The sample runs in its own task, as
    under ``tqdm.gather``. Returns the episode's env and what the check saw after the task
    ended: episodes in play, and the pool's idle and leased envs."""
    task = make_tasks("game:GuessTheNumber-v0-easy", 1, seed=0)[0]
    envs: list[Any] = []

    async def sample() -> None:
        extra_info = make_extra_info(task, tokenizer="tiny", max_turns=steps + 5)
        state_text, extra_info = await reset(extra_info)
        envs.append(rl2._EPISODES[extra_info["xpgym_episode"]].env)
        for _ in range(steps):
            response = await step(state_text, "\\boxed{0}<|im_end|>", extra_info)
            assert not response["done"]
            state_text, extra_info = response["next_state"], response["extra_info"]
        if raise_after:
            raise ConnectionError("the router went away")

    async def rollout() -> dict[str, Any]:
        (outcome,) = await asyncio.gather(sample(), return_exceptions=True)
        pool = rl2._EPISODES.pool
        return {
            "outcome": outcome,
            "in_play": len(rl2._EPISODES),
            "idle": pool.num_idle,
            "leased": pool.num_leased,
        }

    seen = asyncio.run(rollout())
    return envs[0], seen


def test_a_sample_rl2_stops_before_the_episode_ends_gives_its_env_back(tokenizer: Any) -> None:
    in_play = len(rl2._EPISODES)
    env, seen = drop_like_rl2(tokenizer, steps=2)
    assert seen["outcome"] is None
    assert seen["in_play"] == in_play  # reclaimed when the sample's task ended
    assert seen["leased"] == 0
    assert seen["idle"] >= 1
    with rl2._EPISODES.pool.lease(make_tasks("game:GuessTheNumber-v0-easy", 1)[0]) as again:
        assert again is env  # back in the pool, reused


def test_a_sample_rl2_raises_in_gives_its_env_back(tokenizer: Any) -> None:
    in_play = len(rl2._EPISODES)
    _, seen = drop_like_rl2(tokenizer, steps=1, raise_after=True)
    assert isinstance(seen["outcome"], ConnectionError)
    assert (seen["in_play"], seen["leased"]) == (in_play, 0)


def test_a_step_from_another_task_than_the_reset_is_refused(tokenizer: Any) -> None:
    async def reset_in_its_own_task() -> dict[str, Any]:
        extra_info = make_extra_info(make_tasks("game:GuessTheNumber-v0-easy", 1)[0], **TINY)
        return (await asyncio.create_task(reset(extra_info)))[1]

    async def run() -> None:
        extra_info = await reset_in_its_own_task()
        await step("", "\\boxed{0}", extra_info)

    with pytest.raises(RuntimeError, match="one asyncio task"):
        asyncio.run(run())


# --------------------------------------------------------------------------------------
# Infrastructure failures (xpgym.core.errors)
# --------------------------------------------------------------------------------------


def test_an_infra_error_member_has_no_action_and_no_part_in_turn_advantages() -> None:
    config = OmegaConf.create({"estimator": "xpgym_rebn", "gamma": GAMMA})
    tensor_dict, cu_seqs = to_tensor_dict(with_failed_member())
    assert not tensor_dict["action_mask"][-1].any()  # loss mask 0 on its tokens
    assert not tensor_dict["rewards"][-1].any()
    turn_advantages(config, tensor_dict, cu_seqs)
    base, base_seqs = to_tensor_dict(episodes())
    turn_advantages(config, base, base_seqs)
    got, want = tensor_dict["advantages"].numpy(), base["advantages"].numpy()
    np.testing.assert_allclose(got[:4, : want.shape[1]], want, atol=1e-6)
    assert not got[-1].any()


@pytest.mark.parametrize("global_norm", [False, True])
@pytest.mark.parametrize("norm_var", [False, True])
def test_reinforce_without_failed_equals_rl2s_own_reinforce_without_the_failed_member(
    rl2_algorithms: Any, global_norm: bool, norm_var: bool
) -> None:
    """RL2's own function would count the failed member with score 0 in its block."""
    a, b, _, _, failed = with_failed_member()
    tensor_dict, cu_seqs = to_tensor_dict([a, b, failed])
    config = rl2_config(responses_per_prompt=3, global_norm=global_norm, norm_var=norm_var)
    reinforce_without_failed(config, tensor_dict, cu_seqs)
    base, base_seqs = to_tensor_dict(episodes()[:2])
    config = rl2_config(responses_per_prompt=2, global_norm=global_norm, norm_var=norm_var)
    rl2_algorithms.compute_advantages.__wrapped__(config, base, base_seqs, step=0)
    got, want = tensor_dict["advantages"].numpy(), base["advantages"].numpy()
    np.testing.assert_allclose(got[:2, : want.shape[1]], want, atol=1e-6)
    assert not got[2].any()


def test_env_module_ends_an_episode_whose_env_step_raises(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "registry", dict(registry.registry))  # no id left behind
    xpgym.register("test:RL2Toy-v0", "toy_envs:ToyEnv", episode_length=3)
    in_play = len(rl2._EPISODES)
    _, responses = play_like_rl2(tokenizer, ["raise"] * 3, max_turns=3, env_id="test:RL2Toy-v0")
    assert len(responses) == 1  # ToyEnv raises on "raise": the episode ends there
    assert (responses[0]["done"], responses[0]["reward"]) == (True, 0.0)
    assert len(rl2._EPISODES) == in_play
    assert responses[0]["extra_info"][rl2.INFRA_ERROR_KEY]["kind"]  # marked for the rollout


def _sample_tensors() -> list[dict[str, torch.Tensor]]:
    return [
        {"action_mask": torch.tensor([0, 1, 1, 0, 1]), "rewards": torch.tensor([0, 0, 1.0, 0, 0])}
    ]


def test_a_sample_marked_infra_error_trains_on_nothing_and_is_counted() -> None:
    failed = {"extra_info": {rl2.INFRA_ERROR_KEY: {"kind": "env_crash", "message": "boom"}}}
    tensor_dicts, metric = rl2.mask_infra_sample(failed, _sample_tensors(), {})
    assert not tensor_dicts[0]["action_mask"].any()
    assert not tensor_dicts[0]["rewards"].any()
    assert metric["infra_error_episodes"] == [1]
    healthy, expected = {"extra_info": {}}, _sample_tensors()
    tensor_dicts, metric = rl2.mask_infra_sample(healthy, _sample_tensors(), metric)
    assert torch.equal(tensor_dicts[0]["action_mask"], expected[0]["action_mask"])
    assert torch.equal(tensor_dicts[0]["rewards"], expected[0]["rewards"])
    assert metric["infra_error_episodes"] == [1, 0]


def test_install_infra_masking_wraps_rl2s_rollout_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a stand-in of RL2's ``RL2.workers.rollout`` (the real one imports SGLang)."""
    calls = []

    class Rollout:
        async def rollout(self, data: dict, train: bool) -> tuple[list, dict]:
            calls.append(train)
            return _sample_tensors(), {}

    module = types.ModuleType("RL2.workers.rollout")
    module.Rollout = Rollout
    workers = types.ModuleType("RL2.workers")
    workers.rollout = module
    monkeypatch.setitem(sys.modules, "RL2.workers", workers)
    monkeypatch.setitem(sys.modules, "RL2.workers.rollout", module)
    rl2.install_infra_masking()
    rl2.install_infra_masking()  # idempotent: one wrapper
    failed = {"extra_info": {rl2.INFRA_ERROR_KEY: {"kind": "grader", "message": "timeout"}}}
    tensor_dicts, metric = asyncio.run(Rollout().rollout(failed, True))
    assert calls == [True]
    assert not tensor_dicts[0]["action_mask"].any()
    assert metric == {"infra_error_episodes": [1]}


# --------------------------------------------------------------------------------------
# Metrics of reward functions (xpgym.core.rewards)
# --------------------------------------------------------------------------------------


def test_reward_function_metrics_reach_rl2s_rollout_metrics(
    tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "registry", dict(registry.registry))  # no id left behind
    xpgym.register("test:RL2Rewarded-v0", "toy_envs:rewarded_toy_env", episode_length=2)
    _, responses = play_like_rl2(
        tokenizer, ["ab", "abcd"], max_turns=3, env_id="test:RL2Rewarded-v0"
    )
    assert [r["done"] for r in responses] == [False, True]
    extra_info = responses[-1]["extra_info"]
    assert extra_info[rl2.METRICS_KEY] == {
        "metrics/action_chars": 0.0,
        "metrics/action_chars/chars": 4.0,  # the last value the episode reported
    }
    _, metric = rl2.mask_infra_sample({"extra_info": extra_info}, _sample_tensors(), {})
    assert metric["metrics/action_chars/chars"] == [4.0]


def test_dynamic_filtering_turns_on_rl2s_own_zero_variance_filter(tmp_path: Any) -> None:
    from xpgym.adapters.rl2 import ppo_config, ppo_overrides

    def config(**kwargs: Any) -> Any:
        return ppo_config(
            ppo_overrides(model="m", data_path=tmp_path / "d.jsonl", save_dir=tmp_path, **kwargs)
        )

    assert config().rollout.dynamic_filtering is False
    assert config(dynamic_filtering=True).rollout.dynamic_filtering is True
