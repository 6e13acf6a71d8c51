"""A batch a tiny model plays through a trainer's hook: the hook's rows are its converter's.

These are the checks the recipes' ``--dry-run`` used to make on every run (issue 23: a dry
run shows what a user needs before a GPU run; checks live in tests). The tiny offline model
answers greedily within an 8-token budget, so its turns are cut without an end-of-turn token
and its answers vary in length: cases the scripted engines of
``test_adapter_<trainer>.py``, which always end their answers, do not play. The advantage
math on such rows is held to the reference by those files and by parity layer 1.
"""

from __future__ import annotations

import asyncio
import types
from typing import Any

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the tiny model needs transformers")

import xpgym
from xpgym.core.chat import ChatPromptBuilder
from xpgym.core.trajectory import Episode
from xpgym.rollout.runner import (
    EpisodeTask,
    TokenGenerate,
    make_tasks,
    policy_generate,
    run_episode,
)

ENV_ID = "game:GuessTheNumber-v0-easy"  # the recipes' default env
GAMMA = 0.9
MAX_TURNS = 4
BUDGET = 8  # tokens per turn; the tiny model rarely ends an answer within it
TASKS = 2


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, TokenGenerate]:
    """The recipes' tiny offline model (greedy) and its tokenizer, as a `TokenGenerate`."""
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.rollout.policies.hf import HFPolicy

    tokenizer = build_tiny_tokenizer(env_corpus(xpgym.make(ENV_ID), episodes=5))
    model = build_tiny_model(tokenizer, seed=0)
    policy = HFPolicy(model, tokenizer, greedy=True, max_new_tokens=BUDGET)
    return tokenizer, policy_generate(policy)


def play(task: EpisodeTask, tokenizer: Any, generate: TokenGenerate, **limits: Any) -> Episode:
    """`task`'s episode played with `generate` outside any hook (`limits` as `run_episode`)."""
    return asyncio.run(
        run_episode(
            xpgym.make(task.env_id),
            task,
            generate,
            ChatPromptBuilder(tokenizer),
            max_new_tokens=BUDGET,
            max_turns=MAX_TURNS,
            **limits,
        )
    )


def test_the_tiny_model_cuts_turns_at_the_budget(tiny: tuple[Any, TokenGenerate]) -> None:
    """The premise of this file: the played batch has turns cut at the token budget."""
    turns = [turn for task in make_tasks(ENV_ID, TASKS) for turn in play(task, *tiny).turns]
    assert any(turn.info.get("generation_truncated") for turn in turns)
    assert all(len(turn.response_ids) <= BUDGET for turn in turns)


# --------------------------------------------------------------------------------------
# verl: XpgymAgentLoop
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["per_turn", "per_episode"])
def test_verl_agent_loop_rows_equal_the_converters_on_a_played_batch(
    tiny: tuple[Any, TokenGenerate], layout: str
) -> None:
    pytest.importorskip("xpgym.adapters.verl", reason="needs verl 0.9.x", exc_type=ImportError)
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.workers.rollout.replica import TokenOutput

    from xpgym.adapters.verl import XpgymAgentLoop, dataset_rows, episode_outputs

    tokenizer, generate = tiny
    length = 4096  # rollout.prompt_length and rollout.response_length

    class LocalServer:  # verl's server client: token ids in, token ids and log-probs out
        async def generate(
            self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any
        ) -> TokenOutput:
            g = await generate(prompt_ids, sampling_params["max_tokens"])
            return TokenOutput(token_ids=g.token_ids, log_probs=g.logprobs)

    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"name": "vllm", "prompt_length": length, "response_length": length}
            },
            "trainer": {"use_v1": True},
            "algorithm": {"gamma": GAMMA},
            "data": {},
        }
    )
    loop = XpgymAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=LocalServer(),
        tokenizer=tokenizer,
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
    )
    tasks = make_tasks(ENV_ID, TASKS)
    rows = dataset_rows(tasks, layout=layout, max_turns=MAX_TURNS, max_new_tokens=BUDGET)
    for task, row in zip(tasks, rows, strict=True):
        out = asyncio.run(loop.run({"temperature": 0.0}, **row, raw_prompt=row["prompt"]))
        got = out if isinstance(out, list) else [out]
        episode = play(task, tokenizer, generate, max_response_tokens=length)
        expected = episode_outputs(episode, layout=layout, gamma=GAMMA)
        assert [o.prompt_ids for o in got] == [o.prompt_ids for o in expected]
        for key in ("responses", "response_mask", "rm_scores", "rollout_log_probs"):
            assert [o.as_dict()[key].tolist() for o in got] == [
                o.as_dict()[key].tolist() for o in expected
            ], key


# --------------------------------------------------------------------------------------
# OpenRLHF: AgentExecutor
# --------------------------------------------------------------------------------------


def test_openrlhf_executor_output_is_the_converters_on_a_played_batch(
    tiny: tuple[Any, TokenGenerate],
) -> None:
    pytest.importorskip(
        "xpgym.adapters.openrlhf", reason="needs openrlhf 0.11.x", exc_type=ImportError
    )
    from xpgym.adapters.openrlhf import AgentExecutor, agent_output, make_label

    tokenizer, generate = tiny
    max_length = 4096

    class LocalEngine:  # the fields of vLLM's RequestOutput that the executor reads
        async def generate(
            self, token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None
        ) -> Any:
            g = await generate(token_ids, sampling_params.max_tokens)
            steps = [
                {t: types.SimpleNamespace(logprob=lp)}
                for t, lp in zip(g.token_ids, g.logprobs, strict=True)
            ]
            output = types.SimpleNamespace(
                token_ids=g.token_ids, text=g.text, finish_reason=g.finish_reason, logprobs=steps
            )
            return types.SimpleNamespace(outputs=[output])

    executor = AgentExecutor()
    params = types.SimpleNamespace(max_tokens=BUDGET, logprobs=1, temperature=0.0)
    for task in make_tasks(ENV_ID, TASKS):
        label = make_label(task, advantage="rebn", gamma=GAMMA, max_turns=MAX_TURNS)
        out = asyncio.run(
            executor.execute("p", label, params, max_length, tokenizer, LocalEngine())
        )
        episode = play(task, tokenizer, generate, max_total_tokens=max_length)
        expected = agent_output(episode, prompt="p", label=label)
        for key in ("observation_tokens", "action_ranges", "rollout_log_probs", "label"):
            assert out[key] == expected[key], key
        assert out["truncated"] == expected["truncated"]


# --------------------------------------------------------------------------------------
# RL2: the env module, driven by RL2 0.0.2's rollout loop with RL2's own tensor helpers
# --------------------------------------------------------------------------------------


def rl2_rollout(
    extra_info: dict[str, Any], tokenizer: Any, generate: TokenGenerate
) -> tuple[list[Any], list[float]]:
    """What RL2 0.0.2's ``Rollout.rollout`` does for one sample, with a local engine: the
    sample's tensor dicts (RL2's ``state_dict_to_tensor_dict``) and its turn rewards."""
    from RL2.datasets import initialize_state_dict, state_dict_to_tensor_dict

    from xpgym.adapters import rl2

    async def run() -> tuple[list[Any], list[float]]:
        state_text, info = await rl2.reset(extra_info)
        state = initialize_state_dict(tokenizer, state_text)
        rewards: list[float] = []
        for turn in range(1, MAX_TURNS + 1):
            g = await generate(state["states"], BUDGET)
            action_text = tokenizer.decode(g.token_ids, skip_special_tokens=False)
            response = await rl2.step(state_text, action_text, info)
            state["states"] += g.token_ids
            state["actions"] += g.token_ids
            state["action_mask"] += [1] * len(g.token_ids)
            state["logps"] += g.logprobs
            state["rewards"] += [0] * (len(g.token_ids) - 1) + [response["reward"]]
            rewards.append(response["reward"])
            if turn == MAX_TURNS or response["done"]:
                break
            assert response["next_state"].startswith(state_text + action_text)  # one sequence
            delta = response["next_state"][len(state_text + action_text) :]
            for key, values in initialize_state_dict(tokenizer, delta).items():
                state[key] += values
            state_text, info = response["next_state"], response["extra_info"]
        return [state_dict_to_tensor_dict(state)], rewards

    return asyncio.run(run())


def test_rl2_turn_advantages_on_rl2s_own_rollout_batch_equal_the_reference(
    tiny: tuple[Any, TokenGenerate], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("xpgym.adapters.rl2", reason="needs rl-square 0.0.2", exc_type=ImportError)
    pytest.importorskip("RL2.datasets", reason="needs rl-square 0.0.2")
    import torch
    from omegaconf import OmegaConf
    from RL2.datasets import pack_tensor_dicts

    from xpgym.adapters import rl2
    from xpgym.training.advantages import discounted_returns, rebn

    tokenizer, _ = tiny
    monkeypatch.setitem(rl2._TOKENIZERS, "tiny", tokenizer)  # the env module loads it by name
    samples = [
        rl2_rollout(rl2.make_extra_info(task, tokenizer="tiny", max_turns=MAX_TURNS), *tiny)
        for task in make_tasks(ENV_ID, TASKS)
    ]
    tensor_dict = pack_tensor_dicts([td for tds, _ in samples for td in tds])
    counts = torch.tensor([len(tds) for tds, _ in samples])
    cu_seqs = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)])
    rl2.turn_advantages(
        OmegaConf.create({"estimator": "xpgym_rebn", "gamma": GAMMA}), tensor_dict, cu_seqs
    )

    turn_rewards = [rewards for _, rewards in samples]
    width = max(map(len, turn_rewards))
    r = np.array([t + [0.0] * (width - len(t)) for t in turn_rewards])
    m = np.arange(width) < np.array([len(t) for t in turn_rewards])[:, None]
    reference = rebn(discounted_returns(r, m, GAMMA), m)
    mask = tensor_dict["action_mask"].numpy().astype(bool)
    starts = mask & ~np.pad(mask[:, :-1], ((0, 0), (1, 0)))  # each turn's first action token
    np.testing.assert_allclose(tensor_dict["advantages"].numpy()[starts], reference[m], atol=1e-6)
