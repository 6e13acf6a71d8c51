"""OpenRLHF adapter: Experience layout, OpenRLHF's own processing and advantages, the executor.

OpenRLHF's experience maker and samples generator import flash_attn, deepspeed and vllm at
module level (GPU packages). Where those are missing, the `openrlhf_internals` fixture
imports them with empty stand-in modules (`parity.shared.trainer_code.stand_ins`, shared
with the parity suite) and removes the stand-ins and OpenRLHF's modules when this file's
tests are done (not other modules imported meanwhile: torch internals break when imported
twice); the adapter itself never uses stand-ins.
"""

from __future__ import annotations

import asyncio
import json
import sys
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "xpgym.adapters.openrlhf",
    reason="needs openrlhf 0.11.x (the openrlhf extra)",
    exc_type=ImportError,
)
torch = pytest.importorskip("torch")

from adapter_cases import (  # noqa: E402
    GAMMA,
    GROUPS,
    PROMPTS,
    RESPONSE_MASKS,
    RESPONSES,
    REWARD_METRICS,
    SCORES,
    TURN_REWARDS,
    TURN_TOKENS,
    episodes,
    per_token,
    rebn_reference,
    with_failed_member,
    with_reward_metrics,
)

from parity.shared.trainer_code import stand_ins  # noqa: E402
from parity.tokens.openrlhf import GPU_ONLY  # noqa: E402
from xpgym.adapters.openrlhf import (  # noqa: E402
    AGENT_FUNC_PATH,
    AgentExecutor,
    agent_output,
    install_turn_rebn,
    make_label,
    to_experience,
)
from xpgym.rollout.runner import EpisodeTask, make_tasks  # noqa: E402
from xpgym.training.advantages import dr_grpo, grpo, rloo, whiten  # noqa: E402

T = 11  # longest row: B, 3 prompt + 8 response tokens


@pytest.fixture(scope="module")
def openrlhf_internals() -> Iterator[types.SimpleNamespace]:
    with stand_ins(GPU_ONLY, packages=("openrlhf",)):
        from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
        from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
        from openrlhf.trainer.ray.vllm_engine import _load_agent_executor

        saved = RemoteExperienceMaker.__dict__.get("compute_advantages_and_returns")
        yield types.SimpleNamespace(
            RemoteExperienceMaker=RemoteExperienceMaker,
            SamplesGenerator=SamplesGenerator,
            load_agent_executor=_load_agent_executor,
        )
        RemoteExperienceMaker.compute_advantages_and_returns = saved


def maker(
    internals: Any, estimator: str, *, gamma: float = 1.0, n: int = 2, kl: float = 0.0
) -> Any:
    """A stand-in ``self`` for ``RemoteExperienceMaker.compute_advantages_and_returns``: the
    attributes that method reads, with OpenRLHF's CLI defaults."""
    args = types.SimpleNamespace(
        algo=types.SimpleNamespace(
            advantage=types.SimpleNamespace(
                estimator=estimator, gamma=gamma, lambd=1.0, no_std_norm=False
            )
        ),
        rollout=types.SimpleNamespace(n_samples_per_prompt=n),
        reward=types.SimpleNamespace(clip_range=(-10, 10)),
    )
    self = types.SimpleNamespace(
        strategy=types.SimpleNamespace(args=args),
        kl_ctl=types.SimpleNamespace(value=kl),
        advantage_estimator=estimator,
    )
    cls = internals.RemoteExperienceMaker
    self.get_cumulative_returns = lambda *a: cls.get_cumulative_returns(self, *a)
    self.get_advantages_and_returns = lambda *a: cls.get_advantages_and_returns(self, *a)
    return self


def run_openrlhf(
    internals: Any, experiences: list[Any], estimator: str, **kwargs: Any
) -> list[Any]:
    for experience in experiences:
        experience.kl = torch.zeros_like(experience.action_mask, dtype=torch.float32)
    self = maker(internals, estimator, **kwargs)
    return internals.RemoteExperienceMaker.compute_advantages_and_returns(self, experiences)


def full_mask(b: int) -> list[int]:
    """Row b's response_mask over the whole sequence (prompt, response, padding)."""
    mask = [0] * len(PROMPTS[b]) + RESPONSE_MASKS[b]
    return mask + [0] * (T - len(mask))


# --------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------


def test_experience_is_one_right_padded_sequence_per_episode() -> None:
    exp = to_experience(episodes(), pad_token_id=0)
    assert exp.sequences.tolist() == [
        p + r + [0] * (T - len(p) - len(r)) for p, r in zip(PROMPTS, RESPONSES, strict=True)
    ]
    assert exp.attention_mask.tolist() == [
        [1] * (len(p) + len(r)) + [0] * (T - len(p) - len(r))
        for p, r in zip(PROMPTS, RESPONSES, strict=True)
    ]
    assert exp.sequences.dtype == exp.attention_mask.dtype == torch.int64


def test_action_mask_is_the_next_token_view_of_policy_tokens() -> None:
    exp = to_experience(episodes(), pad_token_id=0)
    assert tuple(exp.action_mask.shape) == (4, T - 1)
    # action_mask[:, j] describes token j + 1; env tokens (4 5, 6, 7 8 9) are 0
    assert exp.action_mask.tolist() == [full_mask(b)[1:] for b in range(4)]
    seq = exp.sequences.numpy()
    np.testing.assert_allclose(
        exp.rollout_log_probs.numpy(),
        np.where(exp.action_mask.numpy() == 1, -seq[:, 1:] / 100, 0),
        atol=1e-7,
    )


def test_episode_scalars() -> None:
    eps = episodes()
    eps[1].turns[-1].info["generation_truncated"] = True
    exp = to_experience(eps, pad_token_id=0)
    assert exp.rewards.tolist() == SCORES
    assert exp.scores.tolist() == SCORES
    assert exp.rewards.dtype == torch.float32
    assert exp.response_length.tolist() == [7, 8, 4, 1]  # first to last policy token
    assert exp.truncated.tolist() == [False, True, False, False]
    assert exp.total_length.tolist() == [10.0, 11.0, 6.0, 3.0]
    assert exp.index == [0, 1, 2, 3]
    assert [json.loads(lab)["turn_rewards"] for lab in exp.labels] == TURN_REWARDS


def test_groups_must_be_consecutive_blocks() -> None:
    eps = episodes()
    to_experience(eps, pad_token_id=0, n_samples_per_prompt=2)
    with pytest.raises(ValueError, match="consecutive blocks"):
        to_experience([eps[0], eps[2], eps[1], eps[3]], pad_token_id=0, n_samples_per_prompt=2)


def test_openrlhf_builds_the_same_experience_from_the_agent_output(openrlhf_internals: Any) -> None:
    for episode in episodes():
        response = agent_output(episode, prompt="p", label=None)
        theirs = openrlhf_internals.SamplesGenerator._process_response_into_experience(
            None, response, max_len=64
        )
        ours = to_experience([episode], pad_token_id=0)
        for name in (
            "sequences",
            "attention_mask",
            "action_mask",
            "rollout_log_probs",
            "rewards",
            "response_length",
        ):
            assert getattr(theirs, name).tolist() == getattr(ours, name).tolist(), name
        assert theirs.labels == ours.labels


# --------------------------------------------------------------------------------------
# OpenRLHF's advantage code on converted batches
# --------------------------------------------------------------------------------------


def row_advantages(experience: Any) -> np.ndarray:
    """The advantage of each row: constant over its action tokens for these estimators."""
    adv, mask = experience.advantages.numpy(), experience.action_mask.numpy() == 1
    for b in range(len(adv)):
        assert np.allclose(adv[b][mask[b]], adv[b][mask[b]][0], atol=1e-6)
    return np.array([adv[b][mask[b]][0] for b in range(len(adv))])


def test_openrlhf_group_norm_equals_grpo_with_eps_1e9(openrlhf_internals: Any) -> None:
    (exp,) = run_openrlhf(
        openrlhf_internals, [to_experience(episodes(), pad_token_id=0)], "group_norm"
    )
    np.testing.assert_allclose(row_advantages(exp), grpo(SCORES, GROUPS, eps=1e-9), atol=1e-6)


def test_openrlhf_dr_grpo_and_rloo_equal_the_reference(openrlhf_internals: Any) -> None:
    (exp,) = run_openrlhf(
        openrlhf_internals, [to_experience(episodes(), pad_token_id=0)], "dr_grpo"
    )
    np.testing.assert_allclose(row_advantages(exp), dr_grpo(SCORES, GROUPS), atol=1e-6)
    (exp,) = run_openrlhf(openrlhf_internals, [to_experience(episodes(), pad_token_id=0)], "rloo")
    np.testing.assert_allclose(row_advantages(exp), rloo(SCORES, GROUPS), atol=1e-6)


def test_openrlhf_reinforce_is_token_weighted_episode_whitening(openrlhf_internals: Any) -> None:
    """Formula: gamma=1 puts the episode total on every action token, then whitens over
    tokens with the biased variance clamped at 1e-8."""
    (exp,) = run_openrlhf(
        openrlhf_internals, [to_experience(episodes(), pad_token_id=0)], "reinforce", n=1
    )
    tokens = [sum(t) for t in TURN_TOKENS]  # policy tokens per episode: 5, 4, 4, 1
    expected = whiten(SCORES, weights=tokens, std="population", eps=1e-8, eps_placement="clamp")
    np.testing.assert_allclose(row_advantages(exp), expected, atol=1e-5)


def labelled(eps: list[Any], advantage: str | None) -> Any:
    labels = [
        make_label(EpisodeTask("toy", ep.seed, ep.group_id), advantage=advantage, gamma=GAMMA)
        for ep in eps
    ]
    return to_experience(eps, pad_token_id=0, labels=labels)


def test_override_gives_reference_rebn_across_micro_batches(openrlhf_internals: Any) -> None:
    install_turn_rebn()
    install_turn_rebn()  # idempotent
    eps = episodes()
    parts = run_openrlhf(
        openrlhf_internals, [labelled(eps[:2], "rebn"), labelled(eps[2:], "rebn")], "reinforce"
    )
    expected = per_token(rebn_reference())
    for b in range(4):
        exp, row = parts[b // 2], b % 2  # rows of the two micro-batches
        got = exp.advantages[row].numpy()
        positions = [j for j, m in enumerate(full_mask(b)[1:]) if m]
        policy_values = [x for x, m in zip(expected[b], RESPONSE_MASKS[b], strict=True) if m]
        np.testing.assert_allclose(got[positions], policy_values, atol=1e-6)
        assert not np.delete(got, positions).any()


def test_override_leaves_other_batches_to_openrlhf(openrlhf_internals: Any) -> None:
    install_turn_rebn()
    (exp,) = run_openrlhf(openrlhf_internals, [labelled(episodes(), None)], "group_norm")
    np.testing.assert_allclose(row_advantages(exp), grpo(SCORES, GROUPS, eps=1e-9), atol=1e-6)


def test_override_refuses_a_kl_penalty_it_would_drop(openrlhf_internals: Any) -> None:
    install_turn_rebn()
    with pytest.raises(ValueError, match="init_coef 0"):
        run_openrlhf(openrlhf_internals, [labelled(episodes(), "rebn")], "reinforce", kl=0.01)


def test_make_label_refuses_unknown_advantage() -> None:
    with pytest.raises(ValueError, match="advantage must be one of"):
        make_label(EpisodeTask("toy", 1, "g"), advantage="gae")


# --------------------------------------------------------------------------------------
# The executor, with a scripted engine in place of vLLM
# --------------------------------------------------------------------------------------


class ScriptedEngine:
    """``llm_engine.generate(token_ids, sampling_params)`` returning vLLM-shaped outputs."""

    def __init__(self, tokenizer: Any, guesses: list[int]) -> None:
        self.tokenizer = tokenizer
        self.guesses = list(guesses)
        self.budgets: list[int] = []

    async def generate(
        self, token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None
    ) -> Any:
        self.budgets.append(sampling_params.max_tokens)
        text = f"\\boxed{{{self.guesses.pop(0)}}}"
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        logprobs = [{t: types.SimpleNamespace(logprob=-0.25)} for t in ids]
        output = types.SimpleNamespace(
            token_ids=ids, text=text, finish_reason="stop", logprobs=logprobs
        )
        return types.SimpleNamespace(outputs=[output])


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from random_byte_lm import tiny_tokenizer

    return tiny_tokenizer()


def execute(
    tokenizer: Any, guesses: list[int], max_length: int = 4096
) -> tuple[dict[str, Any], ScriptedEngine]:
    task = make_tasks("game:GuessTheNumber-v0-easy", 1, seed=0)[0]
    label = make_label(task, advantage="rebn", gamma=GAMMA, max_turns=3)
    params = types.SimpleNamespace(max_tokens=None, logprobs=1)
    engine = ScriptedEngine(tokenizer, guesses)
    out = asyncio.run(AgentExecutor().execute("p", label, params, max_length, tokenizer, engine))
    return out, engine


def test_executor_returns_openrlhfs_agent_output(tokenizer: Any, openrlhf_internals: Any) -> None:
    out, engine = execute(tokenizer, [0, 0, 0])
    tokens = out["observation_tokens"]
    assert len(out["action_ranges"]) == 3
    assert len(out["rollout_log_probs"]) == len(tokens)
    inside = {j for start, stop in out["action_ranges"] for j in range(start, stop)}
    assert [lp for j, lp in enumerate(out["rollout_log_probs"]) if j in inside] == [-0.25] * len(
        inside
    )
    assert not any(lp for j, lp in enumerate(out["rollout_log_probs"]) if j not in inside)
    for start, stop in out["action_ranges"]:  # each range is "\boxed{0}" + end of message
        assert tokenizer.decode(tokens[start:stop]) == "\\boxed{0}<|im_end|>"
    turn_rewards = json.loads(out["label"])["turn_rewards"]
    assert out["reward"] == pytest.approx(sum(turn_rewards))
    # the budget is what is left of max_length: it shrinks as the sequence grows
    assert engine.budgets == sorted(engine.budgets, reverse=True)
    experience = openrlhf_internals.SamplesGenerator._process_response_into_experience(
        None, out, max_len=4096
    )
    assert int(experience.action_mask.sum()) == len(inside)


def test_executor_stops_at_max_length(tokenizer: Any) -> None:
    first, _ = execute(tokenizer, [0, 0, 0])
    prompt_tokens = first["action_ranges"][0][0]
    out, _ = execute(tokenizer, [0, 0, 0], max_length=prompt_tokens + 30)
    assert len(out["observation_tokens"]) <= prompt_tokens + 30
    assert len(out["action_ranges"]) < 3


def test_openrlhf_loads_the_agent_func_file(openrlhf_internals: Any) -> None:
    executor = openrlhf_internals.load_agent_executor(AGENT_FUNC_PATH)
    assert isinstance(executor, AgentExecutor)


# --------------------------------------------------------------------------------------
# The recipe's flags, parsed and validated by OpenRLHF's own CLI
# --------------------------------------------------------------------------------------


class ReachedTrainError(Exception):
    """Raised in place of ``ray.init``: OpenRLHF parsed and validated every flag."""


@pytest.mark.parametrize(
    ("algorithm", "n", "filtering"), [("rebn", 1, None), ("grpo", 4, None), ("grpo", 4, (0, 1))]
)
def test_launch_flags_pass_openrlhfs_own_parser(
    openrlhf_internals: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    algorithm: str,
    n: int,
    filtering: tuple[float, float] | None,
) -> None:
    import runpy

    import ray
    from openrlhf.utils import config

    from xpgym.adapters.openrlhf import train_ppo_ray_flags

    flags = train_ppo_ray_flags(
        model="m",
        run_dir=tmp_path,
        algorithm=algorithm,
        n_samples_per_prompt=n,
        dynamic_filtering_range=filtering,
    )

    parsed = {}
    hierarchize = config.hierarchize

    def capture(args: Any) -> Any:
        parsed["args"] = hierarchize(args)
        return parsed["args"]

    def stop(*args: Any, **kwargs: Any) -> None:
        raise ReachedTrainError

    monkeypatch.setattr(config, "hierarchize", capture)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", stop)
    monkeypatch.setattr(sys, "argv", ["train_ppo_ray", *flags])
    with pytest.raises(ReachedTrainError):
        runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__")
    args = parsed["args"]
    assert args.algo.kl.init_coef == 0
    assert args.train.agent_func_path.endswith("openrlhf_agent_func.py")
    assert args.reward.remote_url == ["agent"]  # the executor supplies rewards
    assert args.rollout.n_samples_per_prompt == n
    assert args.data.prompt_dataset == str(tmp_path / "train.jsonl")
    assert args.algo.advantage.estimator == {"rebn": "reinforce", "grpo": "group_norm"}[algorithm]
    assert args.algo.dynamic_filtering_enable is (filtering is not None)
    if filtering is not None:
        assert list(args.algo.dynamic_filtering_range) == list(filtering)


@pytest.mark.parametrize(
    ("algorithm", "n", "message"),
    [("ppo", 1, "algorithm must be one of"), ("grpo", 1, "needs n_samples_per_prompt >= 2")],
)
def test_launch_settings_refuse_what_openrlhf_cannot_run(
    openrlhf_internals: Any, tmp_path: Any, algorithm: str, n: int, message: str
) -> None:
    from xpgym.adapters.openrlhf import check_algorithm, train_ppo_ray_flags

    with pytest.raises(ValueError, match=message):
        check_algorithm(algorithm, n)
    with pytest.raises(ValueError, match=message):
        train_ppo_ray_flags(
            model="m", run_dir=tmp_path, algorithm=algorithm, n_samples_per_prompt=n
        )
    with pytest.raises(ValueError, match="low < high"):
        train_ppo_ray_flags(model="m", run_dir=tmp_path, dynamic_filtering_range=(1, 0))


@pytest.mark.parametrize(("algorithm", "override"), [("rebn", "rebn"), ("rloo", None)])
def test_task_rows_name_the_override_only_where_it_applies_and_ray_installs_it_always(
    openrlhf_internals: Any, tmp_path: Any, algorithm: str, override: str | None
) -> None:
    from xpgym.adapters.openrlhf import DATASET_FILE, ray_runtime_env, write_task_rows

    rows = write_task_rows(
        tmp_path, "game:GuessTheNumber-v0-easy", 3, algorithm=algorithm, gamma=0.5, max_turns=4
    )
    written = [json.loads(line) for line in (tmp_path / DATASET_FILE).read_text().splitlines()]
    assert written == rows
    assert len(rows) == 3
    labels = [json.loads(row["label"]) for row in rows]
    assert {label["xpgym_task"]["env_id"] for label in labels} == {"game:GuessTheNumber-v0-easy"}
    assert [label["options"]["advantage"] for label in labels] == [override] * 3
    assert {label["options"]["max_turns"] for label in labels} == {4}
    # installed for every algorithm: it also fills failed samples' rewards (infra errors)
    hook = ray_runtime_env(algorithm)["worker_process_setup_hook"]
    assert hook == "xpgym.adapters.openrlhf.install_turn_rebn"
    with pytest.raises(ValueError, match="algorithm must be one of"):
        ray_runtime_env("ppo")


# --------------------------------------------------------------------------------------
# Infrastructure failures (xpgym.core.errors)
# --------------------------------------------------------------------------------------


def healthy_row_advantages(experience: Any, rows: int) -> np.ndarray:
    """The constant advantage of each of the first `rows` rows, over its action tokens."""
    adv, mask = experience.advantages.numpy(), experience.action_mask.numpy() == 1
    return np.array([adv[b][mask[b]][0] for b in range(rows)])


def test_an_infra_error_member_keeps_the_group_mean_of_the_others(openrlhf_internals: Any) -> None:
    """OpenRLHF groups fixed blocks, so the failed member stays in its block with the
    healthy mean as reward (`infra_filled_scores`): Dr.GRPO is exact, group_norm's std is
    that of the healthy members times sqrt((m + k - 1) / (m - 1)) = sqrt(2) (m=2, k=1)."""
    cases = with_failed_member()
    block = [cases[0], cases[1], cases[4]]  # g0: A, B and the failed E
    experience = to_experience(block, pad_token_id=0, n_samples_per_prompt=3)
    assert experience.rewards.tolist() == [1.0, 0.0, 0.5]
    assert not experience.action_mask[2].any()  # loss mask 0 on its tokens
    assert experience.info["infra_error"].tolist() == [0.0, 0.0, 1.0]
    (exp,) = run_openrlhf(openrlhf_internals, [experience], "dr_grpo", n=3)
    np.testing.assert_allclose(
        healthy_row_advantages(exp, 2), dr_grpo([1.0, 0.0], ["g0"] * 2), atol=1e-6
    )
    experience = to_experience(block, pad_token_id=0, n_samples_per_prompt=3)
    (exp,) = run_openrlhf(openrlhf_internals, [experience], "group_norm", n=3)
    exact = grpo([1.0, 0.0], ["g0"] * 2, eps=1e-9)
    np.testing.assert_allclose(healthy_row_advantages(exp, 2), exact * np.sqrt(2), atol=1e-6)
    assert not exp.advantages[2].any()


def test_the_override_fills_a_failed_samples_reward_before_openrlhfs_estimator(
    openrlhf_internals: Any,
) -> None:
    """The agent executor hands OpenRLHF each sample's recorded total, a failed one's too
    (E's 5.0); the override sets it to its block's healthy mean first (`fill_failed_rewards`),
    so OpenRLHF's own ``dr_grpo`` gives A and B exactly their advantages without E."""
    install_turn_rebn()
    cases = with_failed_member()
    experience = to_experience([cases[0], cases[1], cases[4]], pad_token_id=0)
    experience.rewards = torch.tensor([1.0, 0.0, 5.0])  # as the agent executor reports them
    (exp,) = run_openrlhf(openrlhf_internals, [experience], "dr_grpo", n=3)
    np.testing.assert_allclose(
        healthy_row_advantages(exp, 2), dr_grpo([1.0, 0.0], ["g0"] * 2), atol=1e-6
    )
    assert not exp.advantages[2].any()
    assert exp.rewards.tolist() == [1.0, 0.0, 0.5]


def test_the_turn_override_leaves_out_an_infra_error_member(openrlhf_internals: Any) -> None:
    install_turn_rebn()
    (exp,) = run_openrlhf(openrlhf_internals, [labelled(with_failed_member(), "rebn")], "reinforce")
    (base,) = run_openrlhf(openrlhf_internals, [labelled(episodes(), "rebn")], "reinforce")
    got, want = exp.advantages.numpy(), base.advantages.numpy()
    np.testing.assert_allclose(got[:4, : want.shape[1]], want, atol=1e-6)
    assert not got[4].any()


def test_an_infra_error_agent_output_has_no_action_range() -> None:
    failed = with_failed_member()[4]
    output = agent_output(failed, prompt="p", label=None)
    assert output["action_ranges"] == []
    assert output["extra_logs"]["xpgym_infra_error"] == 1.0
    assert json.loads(output["label"])["turn_rewards"] == []


def test_reward_function_metrics_reach_openrlhfs_logged_info(openrlhf_internals: Any) -> None:
    exp = to_experience(with_reward_metrics(), pad_token_id=0)
    for key, mean in REWARD_METRICS.items():
        assert exp.info[key].tolist() == [mean] * 4  # OpenRLHF logs the batch mean
    keys = ["action_chars/chars", "not_reported"]
    episode = with_reward_metrics()[2]
    response = agent_output(episode, prompt="p", label=None, metric_keys=keys)
    assert response["extra_logs"]["metrics/action_chars/chars"] == 3.0
    assert response["extra_logs"]["metrics/not_reported"] == 0.0
    theirs = openrlhf_internals.SamplesGenerator._process_response_into_experience(
        None, response, max_len=64
    )
    assert theirs.info["metrics/action_chars/chars"].tolist() == [3.0]


def test_the_label_names_the_metric_keys_the_executor_logs() -> None:
    task = make_tasks("game:GuessTheNumber-v0-easy", 1, seed=0)[0]
    label = json.loads(make_label(task, metric_keys=["f1"]))
    assert label["options"]["metric_keys"] == ["f1"]
