"""verl adapter: DataProto layout, verl's own advantage code on it, and the agent loop."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "xpgym.adapters.verl", reason="needs verl 0.9.x (the verl extra)", exc_type=ImportError
)
torch = pytest.importorskip("torch")

from adapter_cases import (  # noqa: E402
    GAMMA,
    GROUPS,
    PROMPTS,
    RESPONSE_MASKS,
    RESPONSES,
    REWARD_METRICS,
    REWARD_POSITIONS,
    SCORES,
    TURN_RETURNS,
    TURN_REWARDS,
    TURN_TOKENS,
    episodes,
    per_token,
    rebn_reference,
    with_failed_member,
    with_reward_metrics,
)
from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402
from verl.trainer.config import AlgoConfig  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage  # noqa: E402
from verl.utils.tensordict_utils import list_of_dict_to_tensordict  # noqa: E402
from verl.workers.rollout.llm_server import LLMServerClient  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from xpgym.adapters.verl import (  # noqa: E402
    ALGORITHMS,
    ESTIMATORS,
    XpgymAgentLoop,
    dataset_rows,
    episode_outputs,
    ppo_config,
    ppo_overrides,
    register_estimators,
    to_data_proto,
)
from xpgym.core.trajectory import Episode, Turn  # noqa: E402
from xpgym.rollout.runner import make_tasks  # noqa: E402
from xpgym.training.advantages import CRITIC_FREE_ALGORITHMS, dr_grpo, grpo, rloo, whiten  # noqa: E402

P, R = 3, 8  # longest prompt and response of the cases


def advantages(data: DataProto, estimator: str, gamma: float = GAMMA, **kwargs: Any) -> np.ndarray:
    """verl's own dispatch (`compute_advantage`), after V1's rm_scores -> token_level_rewards."""
    data.batch["token_level_rewards"] = data.batch["rm_scores"]
    out = compute_advantage(
        data, adv_estimator=estimator, gamma=gamma, config=AlgoConfig(gamma=gamma), **kwargs
    )
    return out.batch["advantages"].numpy()


def response_part(values: np.ndarray, b: int) -> list[float]:
    return values[b, : len(RESPONSES[b])].tolist()


# --------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------


def test_per_episode_rows_are_verls_agent_loop_layout() -> None:
    data = to_data_proto(episodes(), pad_token_id=0)
    batch = data.batch
    assert batch["prompts"].tolist() == [[1, 2, 3], [1, 2, 3], [0, 5, 6], [0, 5, 6]]  # left pad
    assert batch["responses"].tolist() == [r + [0] * (R - len(r)) for r in RESPONSES]
    assert batch["response_mask"].tolist() == [m + [0] * (R - len(m)) for m in RESPONSE_MASKS]
    assert batch["input_ids"].tolist() == [
        p + r for p, r in zip(batch["prompts"].tolist(), batch["responses"].tolist(), strict=True)
    ]
    assert batch["attention_mask"].tolist() == [
        [0] * (P - len(p)) + [1] * (len(p) + len(r)) + [0] * (R - len(r))
        for p, r in zip(PROMPTS, RESPONSES, strict=True)
    ]
    assert batch["position_ids"][2].tolist() == [0, 0, 1, 2, 3, 4, 5, 5, 5, 5, 5]
    for key, dtype in [
        ("prompts", torch.int64),
        ("responses", torch.int64),
        ("response_mask", torch.int64),
        ("rm_scores", torch.float32),
        ("rollout_log_probs", torch.float32),
    ]:
        assert batch[key].dtype == dtype, key
    assert data.non_tensor_batch["uid"].tolist() == GROUPS
    assert data.non_tensor_batch["__num_turns__"].tolist() == [4, 6, 2, 2]


STEP_ID_KEYS = ("xpgym_state_keys", "xpgym_node_ids", "xpgym_tree_root")


def forked() -> list[Episode]:
    """The cases with episode ids, the second a branch of the first forked at turn 1, the
    first turn of each group on one observation."""
    eps = episodes()
    for e, episode in enumerate(eps):
        episode.episode_id = f"e{e}"
        for t, turn in enumerate(episode.turns):
            turn.observation = f"o{t}" if t == 0 else f"o{e}.{t}"
    eps[1].parent_id, eps[1].parent_turn = "e0", 1
    return eps


def test_without_step_ids_the_batch_carries_no_step_ids() -> None:
    data = to_data_proto(forked(), pad_token_id=0)
    assert not set(STEP_ID_KEYS) & set(data.non_tensor_batch)


@pytest.mark.parametrize("layout", ["per_episode", "per_turn"])
def test_step_ids_reach_the_non_tensor_batch_one_entry_per_row(layout: str) -> None:
    data = to_data_proto(forked(), pad_token_id=0, layout=layout, step_ids=True)
    nt = data.non_tensor_batch
    keys, nodes = nt["xpgym_state_keys"], nt["xpgym_node_ids"]
    assert keys.dtype == nodes.dtype == nt["xpgym_tree_root"].dtype == object
    assert len(keys) == len(nodes) == len(nt["xpgym_tree_root"]) == len(data)
    per_turn = [key for row in keys for key in row]  # both layouts: every turn, in order
    observed = ["o0", "o0.1", "o0", "o1.1", "o1.2", "o0", "o0"]
    assert per_turn == [f'obs:"{observation}"' for observation in observed]
    assert [node for row in nodes for node in row] == [
        *("e0#0", "e0#1"),
        *("e0#0", "e1#1", "e1#2"),  # the branch shares its parent's turn 0
        *("e2#0", "e3#0"),
    ]
    assert set(nt["xpgym_tree_root"][nt["uid"] == "g0"]) == {"g0"}


def test_step_ids_follow_their_rows_through_verls_selection() -> None:
    data = to_data_proto(forked(), pad_token_id=0, layout="per_turn", step_ids=True)
    picked = data.select_idxs(np.array([4, 1]))
    assert picked.non_tensor_batch["xpgym_node_ids"].tolist() == [("e1#2",), ("e0#1",)]
    assert picked.batch["responses"].shape[0] == 2


def test_episodes_without_ids_carry_state_keys_only() -> None:
    data = to_data_proto(episodes(), pad_token_id=0, step_ids=True)
    assert "xpgym_state_keys" in data.non_tensor_batch
    assert "xpgym_node_ids" not in data.non_tensor_batch
    assert "xpgym_tree_root" not in data.non_tensor_batch


def test_per_episode_rewards_sit_on_each_turns_last_policy_token() -> None:
    rm_scores = to_data_proto(episodes(), pad_token_id=0).batch["rm_scores"].numpy()
    for b, (positions, rewards) in enumerate(zip(REWARD_POSITIONS, TURN_REWARDS, strict=True)):
        expected = np.zeros(R)
        expected[positions] = rewards
        np.testing.assert_array_equal(rm_scores[b], expected)


def test_env_tokens_and_padding_carry_no_logprob_and_no_mask() -> None:
    batch = to_data_proto(episodes(), pad_token_id=0).batch
    logprobs, mask, responses = (
        batch[k].numpy() for k in ("rollout_log_probs", "response_mask", "responses")
    )
    np.testing.assert_allclose(logprobs, np.where(mask == 1, -responses / 100, 0.0), atol=1e-7)


def test_per_turn_rows_carry_the_turn_return_on_its_last_token() -> None:
    data = to_data_proto(episodes(), pad_token_id=0, layout="per_turn", gamma=GAMMA)
    batch = data.batch
    assert len(data) == 7
    prompts = [turn.prompt_ids for ep in episodes() for turn in ep.turns]
    width = max(map(len, prompts))
    assert batch["prompts"].tolist() == [[0] * (width - len(p)) + p for p in prompts]
    returns = [g for ep in TURN_RETURNS for g in ep]
    lengths = [len(turn.response_ids) for ep in episodes() for turn in ep.turns]
    for b, (g, n) in enumerate(zip(returns, lengths, strict=True)):
        expected = np.zeros(batch["rm_scores"].shape[1])
        expected[n - 1] = g
        np.testing.assert_allclose(batch["rm_scores"][b].numpy(), expected, atol=1e-7)
        assert batch["response_mask"][b].tolist() == [1] * n + [0] * (len(expected) - n)
    assert data.non_tensor_batch["uid"].tolist() == ["g0"] * 5 + ["g1"] * 2


@pytest.mark.parametrize("layout", ["per_episode", "per_turn"])
def test_episode_outputs_are_the_converters_rows_unpadded(layout: str) -> None:
    for episode in episodes():
        data = to_data_proto([episode], pad_token_id=0, layout=layout, gamma=GAMMA)
        outputs = episode_outputs(episode, layout=layout, gamma=GAMMA)
        assert len(outputs) == len(data)
        for b, output in enumerate(outputs):
            width = data.batch["prompts"].shape[1]
            real_prompt = data.batch["attention_mask"][b][:width] == 1
            assert output.prompt_ids == data.batch["prompts"][b][real_prompt].tolist()
            n = len(output.response_ids)
            assert output.response_ids == data.batch["responses"][b][:n].tolist()
            assert output.response_mask == data.batch["response_mask"][b][:n].tolist()
            assert output.token_rewards == data.batch["rm_scores"][b][:n].tolist()
            assert output.response_logprobs == data.batch["rollout_log_probs"][b][:n].tolist()


def test_fixed_shapes_and_response_truncation() -> None:
    data = to_data_proto(
        episodes(),
        pad_token_id=0,
        max_prompt_length=4,
        max_response_length=6,
        truncate=True,
        pad_to_max_length=True,
    )
    assert tuple(data.batch["prompts"].shape) == (4, 4)
    assert tuple(data.batch["responses"].shape) == (4, 6)
    # B's response [20 6 21 22 7 8 | 9 23] loses its last turn; its reward -0.5 moves to 22
    assert data.batch["rm_scores"][1].tolist() == [0.5, 0, 0, -0.5, 0, 0]
    with pytest.raises(ValueError, match="max_response_length=6"):
        to_data_proto(episodes(), pad_token_id=0, max_response_length=6)


# --------------------------------------------------------------------------------------
# verl's advantage code on converted batches
# --------------------------------------------------------------------------------------


def test_estimators_are_registered_with_verl_idempotently() -> None:
    register_estimators()
    register_estimators()
    for name, fn in ESTIMATORS.items():
        assert core_algos.get_adv_estimator_fn(name) is fn


@pytest.mark.parametrize("layout", ["per_episode", "per_turn"])
def test_xpgym_rebn_through_verl_equals_the_reference(layout: str) -> None:
    data = to_data_proto(episodes(), pad_token_id=0, layout=layout, gamma=GAMMA)
    got = advantages(data, "xpgym_rebn")
    reference = rebn_reference()
    if layout == "per_episode":
        expected = per_token(reference)
        for b in range(4):
            np.testing.assert_allclose(response_part(got, b), expected[b], atol=1e-6)
    else:
        mask = data.batch["response_mask"].numpy() == 1
        flat = [a for ep in reference for a in ep]
        for b in range(len(flat)):
            np.testing.assert_allclose(got[b][mask[b]], flat[b], atol=1e-6)
            assert not got[b][~mask[b]].any()


def test_xpgym_reinforce_gives_discounted_returns_per_turn() -> None:
    data = to_data_proto(episodes(), pad_token_id=0)
    got = advantages(data, "xpgym_reinforce")
    expected = per_token(TURN_RETURNS)
    for b in range(4):
        np.testing.assert_allclose(response_part(got, b), expected[b], atol=1e-6)


def with_single_member_group() -> list[Episode]:
    lone = Turn("o", "a", 3.0, True, prompt_ids=[5], response_ids=[9], response_logprobs=[-0.09])
    return [*episodes(), Episode("toy", group_id="g2", turns=[lone])]


def row_values(got: np.ndarray, data: DataProto) -> np.ndarray:
    """The advantage of each row (the value on its first policy token)."""
    first = data.batch["response_mask"].int().argmax(1).numpy()
    return got[np.arange(len(first)), first]


def test_verl_grpo_equals_reference_grpo_keeping_single_members() -> None:
    eps = with_single_member_group()
    data = to_data_proto(eps, pad_token_id=0)
    got = row_values(advantages(data, "grpo", norm_adv_by_std_in_grpo=True), data)
    expected = grpo([*SCORES, 3.0], [*GROUPS, "g2"], single_member="keep")
    np.testing.assert_allclose(got, expected, atol=1e-6)
    assert got[4] == pytest.approx(3.0 / (1 + 1e-6))  # mean 0, std 1 for a lone member


def test_verl_grpo_without_std_equals_dr_grpo() -> None:
    eps = with_single_member_group()
    data = to_data_proto(eps, pad_token_id=0)
    got = row_values(advantages(data, "grpo", norm_adv_by_std_in_grpo=False), data)
    np.testing.assert_allclose(
        got, dr_grpo([*SCORES, 3.0], [*GROUPS, "g2"], single_member="keep"), atol=1e-6
    )


def test_verl_rloo_equals_reference_rloo() -> None:
    data = to_data_proto(episodes(), pad_token_id=0)
    got = row_values(advantages(data, "rloo"), data)
    np.testing.assert_allclose(got, rloo(SCORES, GROUPS, single_member="keep"), atol=1e-6)


def test_verl_reinforce_plus_plus_at_gamma_one_is_token_weighted_whitening() -> None:
    """Formula: with gamma=1 every token of turn t gets G_t (undiscounted reward-to-go),
    whitened over tokens with the unbiased variance: ``whiten(G, m, weights=n_tok)``."""
    data = to_data_proto(episodes(), pad_token_id=0)
    got = advantages(data, "reinforce_plus_plus", gamma=1.0)
    returns = [list(np.cumsum(r[::-1])[::-1]) for r in TURN_REWARDS]
    n_tok = TURN_TOKENS
    width = max(map(len, returns))
    g = np.array([r + [0] * (width - len(r)) for r in returns])
    w = np.array([r + [0] * (width - len(r)) for r in n_tok])
    whitened = whiten(g, w > 0, weights=w).tolist()
    expected = per_token([row[: len(r)] for row, r in zip(whitened, returns, strict=True)])
    for b in range(4):
        np.testing.assert_allclose(response_part(got, b), expected[b], atol=1e-5)


def test_verl_reinforce_plus_plus_discounts_per_policy_token() -> None:
    """Formula (a difference from the reference): verl discounts by policy *tokens*, so
    ``G_j = sum_{i >= j, policy} gamma ** (#policy tokens in [j, i)) * r_i`` before whitening."""
    data = to_data_proto(episodes(), pad_token_id=0)
    data.batch["token_level_rewards"] = data.batch["rm_scores"]
    _, returns = core_algos.compute_reinforce_plus_plus_outcome_advantage(
        data.batch["rm_scores"], data.batch["response_mask"], config=AlgoConfig(gamma=GAMMA)
    )
    rewards = data.batch["rm_scores"].numpy()
    mask = data.batch["response_mask"].numpy()
    for b in range(4):
        policy = np.flatnonzero(mask[b])
        expected = np.zeros(R)
        for k, j in enumerate(policy):
            later = policy[k:]
            expected[j] = sum(GAMMA**n * rewards[b, i] for n, i in enumerate(later))
        np.testing.assert_allclose(returns[b].numpy(), expected, atol=1e-6)


# --------------------------------------------------------------------------------------
# The agent loop, with a scripted engine in place of verl's server
# --------------------------------------------------------------------------------------


class ScriptedServer:
    """verl's vLLM server actor: answers ``\\boxed{n}`` with n from `guesses`.

    Like verl's server it reports the weight version that answered each call
    (``extra_fields["global_steps"]``, one of `versions` per call: a weight sync may land
    between two turns of an episode) and the prefix-cache hits (``num_cached_tokens``);
    `extra_fields` adds more per-call fields (e.g. speculative-decoding counters).
    """

    def __init__(
        self,
        tokenizer: Any,
        guesses: list[int],
        versions: list[int] | None = None,
        extra_fields: dict[str, Any] | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.guesses = list(guesses)
        self.versions = list(versions) if versions is not None else [1] * len(guesses)
        self.extra_fields = dict(extra_fields or {})
        self.budgets: list[int] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any
    ) -> TokenOutput:
        self.budgets.append(sampling_params["max_tokens"])
        text = f"\\boxed{{{self.guesses.pop(0)}}}"
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return TokenOutput(
            token_ids=ids,
            log_probs=[-0.25] * len(ids),
            stop_reason="completed",
            num_preempted=0,
            extra_fields={
                "global_steps": self.versions.pop(0),
                "num_cached_tokens": 0,
                **self.extra_fields,
            },
        )


class RayHandle:
    """A Ray actor handle over a local object: ``handle.method.remote(...)`` calls it."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def __getattr__(self, name: str) -> Any:
        return SimpleNamespace(remote=getattr(self.target, name))


class OneServerBalancer:
    """verl's global load balancer with one server behind it."""

    def __init__(self, server: ScriptedServer) -> None:
        self.server = RayHandle(server)

    async def require_acquire_fields(self) -> list[str]:
        return []

    async def require_release_fields(self) -> list[str]:
        return []

    async def acquire_server(self, request_id: str) -> tuple[str, RayHandle]:
        return "server-0", self.server

    def release_server(self, server_id: str, **fields: Any) -> None:
        pass


def agent_loop(tokenizer: Any, server: ScriptedServer, *, use_v1: bool = True) -> XpgymAgentLoop:
    """The agent loop as verl builds it: its ``server_manager`` is verl's own server client
    (which adds ``min_global_steps`` / ``max_global_steps`` to every generate output)."""
    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"name": "vllm", "prompt_length": 4096, "response_length": 2048}
            },
            "trainer": {"use_v1": use_v1},
            "algorithm": {"gamma": GAMMA},
            "data": {},
        }
    )
    client = LLMServerClient(config, load_balancer_handle=RayHandle(OneServerBalancer(server)))
    return XpgymAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=client,
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
    )


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from random_byte_lm import tiny_tokenizer

    return tiny_tokenizer()


def run_row(tokenizer: Any, layout: str, guesses: list[int], **server: Any) -> Any:
    """Play one GuessTheNumber row; `server` goes to `ScriptedServer`."""
    task = make_tasks("game:GuessTheNumber-v0-easy", 1, seed=0)[0]
    row = dataset_rows([task], layout=layout, max_turns=3)[0]
    loop = agent_loop(tokenizer, ScriptedServer(tokenizer, guesses, **server))
    return asyncio.run(loop.run({"temperature": 1.0}, **row, raw_prompt=row["prompt"]))


def test_agent_loop_per_episode_returns_one_row_with_per_turn_rewards(tokenizer: Any) -> None:
    out = run_row(tokenizer, "per_episode", [0, 0, 0])  # 0 is out of range: invalid thrice
    assert not isinstance(out, list)
    fields = out.as_dict()
    mask = fields["response_mask"]
    assert (
        len(fields["responses"])
        == len(mask)
        == len(fields["rm_scores"])
        == len(fields["rollout_log_probs"])
    )
    ends = [
        j for j in range(len(mask)) if mask[j] == 1 and (j + 1 == len(mask) or mask[j + 1] == 0)
    ]
    assert len(ends) == 3  # three turns, three runs of policy tokens
    rewards = fields["rm_scores"]
    assert rewards[ends].tolist() == pytest.approx(out.extra_fields["turn_scores"])
    assert float(rewards.sum()) == pytest.approx(sum(out.extra_fields["turn_scores"]))
    assert out.num_turns == 6


def test_agent_loop_per_turn_returns_a_row_per_turn_with_returns(tokenizer: Any) -> None:
    outs = run_row(tokenizer, "per_turn", [0, 0, 0])
    assert isinstance(outs, list)
    assert len(outs) == 3
    r = outs[0].extra_fields["turn_scores"]
    expected = [r[0] + GAMMA * r[1] + GAMMA**2 * r[2], r[1] + GAMMA * r[2], r[2]]
    for out, g in zip(outs, expected, strict=True):
        scores = out.as_dict()["rm_scores"]
        assert scores[-1].item() == pytest.approx(g, abs=1e-6)
        assert not scores[:-1].any()
    # each row's prompt is the previous row's prompt + response + env tokens
    assert outs[1].prompt_ids[: len(outs[0].prompt_ids) + len(outs[0].response_ids)] == (
        outs[0].prompt_ids + outs[0].response_ids
    )


def test_agent_loop_rows_equal_the_converters(tokenizer: Any) -> None:
    import xpgym
    from xpgym.core.chat import ChatPromptBuilder
    from xpgym.rollout.runner import EpisodeTask, run_episode

    task = make_tasks("game:GuessTheNumber-v0-easy", 1, seed=0)[0]
    server = ScriptedServer(tokenizer, [0, 0, 0])

    async def generate(prompt_ids: list[int], budget: int) -> Any:
        from xpgym.rollout.runner import generation_from_ids

        out = await server.generate(
            "x", prompt_ids=prompt_ids, sampling_params={"max_tokens": budget}
        )
        return generation_from_ids(
            tokenizer,
            out.token_ids,
            logprobs=out.log_probs,
            stop_token_ids=[tokenizer.eos_token_id],
            max_new_tokens=budget,
        )

    episode = asyncio.run(
        run_episode(
            xpgym.make(task.env_id),
            EpisodeTask.from_json(task.to_json()),
            generate,
            ChatPromptBuilder(tokenizer),
            max_new_tokens=2048,
            max_turns=3,
            max_response_tokens=2048,
        )
    )
    expected = episode_outputs(episode, layout="per_turn", gamma=GAMMA)
    got = run_row(tokenizer, "per_turn", [0, 0, 0])
    assert [o.as_dict()["rm_scores"].tolist() for o in got] == [
        o.as_dict()["rm_scores"].tolist() for o in expected
    ]
    assert [o.prompt_ids for o in got] == [o.prompt_ids for o in expected]


@pytest.mark.parametrize("layout", ["per_episode", "per_turn"])
def test_agent_loop_outputs_carry_the_weight_versions_verls_v1_trainer_casts(
    tokenizer: Any, layout: str
) -> None:
    """verl's V1 worker tags every output with ``extra_fields["min_global_steps"]`` /
    ``["max_global_steps"]`` (agent_loop_tq.py:215-218) and its trainer casts them with
    ``dtype=int`` (trainer_base.py:1897): the first and the last generate of the episode."""
    out = run_row(tokenizer, layout, [0, 0, 0], versions=[3, 4, 5])  # synced after turns 1, 2
    outputs = out if isinstance(out, list) else [out]
    fields = [o.as_dict() for o in outputs]  # what the V1 worker stores, one per row
    list_of_dict_to_tensordict(fields)  # the rows of one episode pack together
    for key, version in [("min_global_steps", 3), ("max_global_steps", 5)]:
        tags = np.array([f["extra_fields"].get(key) for f in fields], dtype=int)
        assert tags.tolist() == [version] * len(outputs), key
    for output in outputs:
        assert output.extra_fields["num_cached_tokens"] == 0
        assert output.metrics.num_preempted == 0
    # the rows of an episode do not share one dict (verl writes into each row's fields)
    assert len({id(o.extra_fields) for o in outputs}) == len(outputs)


def test_agent_loop_sums_speculative_decoding_counters_over_the_episode(tokenizer: Any) -> None:
    counters = {
        "spec_num_draft_tokens": 4,
        "spec_num_accepted_tokens": 3,
        "spec_num_verify_steps": 2,
    }
    out = run_row(tokenizer, "per_episode", [0, 0, 0], extra_fields=counters)
    for key, per_call in counters.items():
        assert out.extra_fields[key] == 3 * per_call, key


def test_agent_loop_refuses_the_legacy_trainer(tokenizer: Any) -> None:
    with pytest.raises(ValueError, match="use_v1"):
        agent_loop(tokenizer, ScriptedServer(tokenizer, []), use_v1=False)


def test_launch_config_composes_and_names_every_algorithm(tmp_path: Path) -> None:
    config = ppo_config(ppo_overrides(model="m", run_dir=tmp_path, rollout_name="hf_cpu"))
    assert config.actor_rollout_ref.rollout.name == "hf_cpu"
    assert config.data.train_files == str(tmp_path / "train.parquet")
    assert config.algorithm.adv_estimator == "xpgym_rebn"
    for algorithm, (estimator, _) in ALGORITHMS.items():
        overrides = ppo_overrides(model="m", run_dir=tmp_path, algorithm=algorithm)
        assert f"algorithm.adv_estimator={estimator}" in overrides
    with pytest.raises(ValueError, match="algorithm must be one of"):
        ppo_overrides(model="m", run_dir=tmp_path, algorithm="ppo")  # type: ignore[arg-type]


def test_every_critic_free_algorithm_of_the_dispatch_has_a_verl_estimator() -> None:
    assert set(ALGORITHMS) == set(CRITIC_FREE_ALGORITHMS)


# --------------------------------------------------------------------------------------
# Infrastructure failures (xpgym.core.errors)
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("estimator", "kwargs"),
    [("grpo", {"norm_adv_by_std_in_grpo": True}), ("rloo", {}), ("xpgym_rebn", {})],
)
def test_an_infra_error_member_leaves_the_others_advantages_as_if_absent(
    estimator: str, kwargs: dict[str, Any]
) -> None:
    register_estimators()
    want = advantages(to_data_proto(episodes(), pad_token_id=0), estimator, **kwargs)
    data = to_data_proto(with_failed_member(), pad_token_id=0)
    got = advantages(data, estimator, **kwargs)
    np.testing.assert_allclose(got[:4, : want.shape[1]], want, atol=1e-6)
    assert not data.batch["response_mask"][4].any()  # loss mask 0 on its tokens
    assert not got[4].any()


@pytest.mark.parametrize(
    ("algorithm", "verls"),
    [("grpo", ("grpo", {"norm_adv_by_std_in_grpo": True})), ("rloo", ("rloo", {}))],
)
def test_the_launch_estimators_set_a_failed_agent_loop_sample_apart(
    algorithm: str, verls: tuple[str, dict[str, Any]]
) -> None:
    """In the agent loop E keeps its prompt's uid; ``xpgym_grpo``/``xpgym_rloo`` (what
    `ALGORITHMS` launches) still give the others exactly verl's values without E."""
    estimator, by_std = ALGORITHMS[algorithm]
    a, b, _, _, failed = with_failed_member()
    data = to_data_proto([a, b, failed], pad_token_id=0)
    data.non_tensor_batch["uid"] = np.array(["g0"] * 3, dtype=object)  # one uid per prompt
    data.batch["token_level_rewards"] = data.batch["rm_scores"]
    config = AlgoConfig(gamma=GAMMA, norm_adv_by_std_in_grpo=by_std)
    got = compute_advantage(data, adv_estimator=estimator, config=config).batch["advantages"]
    want = advantages(to_data_proto(episodes()[:2], pad_token_id=0), verls[0], **verls[1])
    np.testing.assert_allclose(got.numpy()[:2, : want.shape[1]], want, atol=1e-6)
    assert not got[2].any()


def test_the_batch_counts_infra_error_episodes_by_cause() -> None:
    data = to_data_proto(with_failed_member(), pad_token_id=0, layout="per_turn", gamma=GAMMA)
    assert data.meta_info["xpgym_metrics"] == {
        "infra_error_episodes": 1.0,
        "infra_error_episodes/grader_timeout": 1.0,
    }
    assert data.non_tensor_batch["uid"][-1] == "xpgym-infra-error-4"


def test_an_infra_error_agent_loop_output_has_no_loss_tokens_and_names_its_cause() -> None:
    (output,) = episode_outputs(with_failed_member()[4], layout="per_episode", gamma=GAMMA)
    assert output.response_ids == [50, 51]
    assert output.response_mask == [0, 0]
    assert output.extra_fields["infra_error"] == "grader_timeout"
    (ok,) = episode_outputs(episodes()[2], layout="per_episode", gamma=GAMMA)
    assert ok.extra_fields["infra_error"] is None


def test_reward_function_metrics_reach_verl() -> None:
    data = to_data_proto(with_reward_metrics(), pad_token_id=0)
    assert REWARD_METRICS.items() <= data.meta_info["xpgym_metrics"].items()
    (episode, *_) = with_reward_metrics()
    for output in episode_outputs(episode, layout="per_turn", gamma=GAMMA):
        assert output.extra_fields["xpgym_metrics"] == {
            "metrics/action_chars": 0.0,
            "metrics/action_chars/chars": 1.0,
        }


def test_filter_groups_turns_on_verls_dapo_filter_on_the_rows_reward(tmp_path: Path) -> None:
    from verl.trainer.config import FilterGroupsConfig
    from verl.utils.config import omega_conf_to_dataclass

    default = ppo_config(ppo_overrides(model="m", run_dir=tmp_path))
    assert default.algorithm.filter_groups.enable is False
    config = ppo_config(ppo_overrides(model="m", run_dir=tmp_path, filter_groups=True))
    filter_groups = omega_conf_to_dataclass(config.algorithm.filter_groups)
    assert isinstance(filter_groups, FilterGroupsConfig)
    assert (filter_groups.enable, filter_groups.metric) == (True, "reward")
