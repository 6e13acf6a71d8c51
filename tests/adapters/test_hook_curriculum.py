"""Every trainer's hook under one shared curriculum (`xpgym.rollout.shared_curriculum`).

A run's tasks name the curriculum file (`make_tasks(..., curriculum=path)`); the hooks of
verl, OpenRLHF and RL2 play them through `xpgym.rollout.runner`, ROLL's GEM env takes the
path in its env config, Oat's actor in ``XpgymArgs.curriculum`` (its test is in
``test_adapter_oat.py``, with Oat's stubs) and TRL's ``rollout_func`` plays the tasks (its
test: ``test_adapter_trl_curriculum.py``). Each test plays episodes one by one through the
hook and checks that

* each episode played the level the file held when it started (the level the episode
  reported, where the hook passes it on),
* the file then holds exactly what one in-process `SuccessRateScheduler` holds after the
  same results in the same order (so every result reached it, at the level it was played).

The policy is scripted: turn ``t`` guesses ``t + 1``, so GuessTheNumber (``max_number =
2 + level``, 7 turns) is always won up to level 5 and sometimes lost above: with a window of
one result, levels climb and then move both ways.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="the hooks build prompts with a tokenizer")

from random_byte_lm import EOS_ID, IM_START_ID, tiny_tokenizer

from xpgym.rollout.curriculum import CONTINUOUS_KNOBS, KnobLadder, SuccessRateScheduler
from xpgym.rollout.policies import Generation
from xpgym.rollout.runner import EpisodeTask, make_tasks
from xpgym.rollout.shared_curriculum import SharedCurriculum

FAMILY = "game:GuessTheNumber-v0"
LEVEL_METRIC = f"metrics/curriculum/{FAMILY}/level"
RULE = {"target": 0.5, "tolerance": 0.1, "window": 1, "start_level": 3}
EPISODES = 8
MAX_TURNS = 8  # the ladder's envs end every episode at 7 turns


def guess_text(turn: int) -> str:
    return f"\\boxed{{{turn + 1}}}"


async def scripted_generate(prompt_ids: list[int], budget: int) -> Generation:
    """Turn ``t`` (counted from the prompt's ChatML turns) guesses ``t + 1``."""
    turn = prompt_ids.count(IM_START_ID) // 2 - 1
    text = guess_text(turn)
    ids = [*text.encode(), EOS_ID]
    return Generation(text=text, token_ids=ids, logprobs=[-0.5] * len(ids))


@pytest.fixture
def curriculum(tmp_path: Path) -> SharedCurriculum:
    ladder = KnobLadder(FAMILY, CONTINUOUS_KNOBS[FAMILY])
    return SharedCurriculum.create(tmp_path / "curriculum.json", [ladder], **RULE)


def tasks_of(curriculum: SharedCurriculum) -> list[EpisodeTask]:
    """The run's tasks: any id of the family, naming the file."""
    return make_tasks(f"{FAMILY}-easy", EPISODES, seed=11, curriculum=curriculum.path)


def check_hook(
    curriculum: SharedCurriculum, play: Callable[[EpisodeTask], tuple[float | None, bool]]
) -> None:
    """Play every task through `play` (returns the level the episode reported, or None where
    the hook does not pass it on, and whether it was won) and check the module's claims."""
    local = SuccessRateScheduler(curriculum.ladders, **RULE)
    played = []
    for task in tasks_of(curriculum):
        before = curriculum.levels[FAMILY]
        reported, won = play(task)
        if reported is not None:
            assert reported == before
        local.record(FAMILY, before, won)
        assert curriculum.scheduler().state_dict() == local.state_dict()
        played.append(before)
    assert curriculum.results == EPISODES
    assert len(set(played)) > 2  # the levels moved during the run


def test_verl_agent_loop_plays_and_feeds_the_shared_curriculum(
    curriculum: SharedCurriculum,
) -> None:
    pytest.importorskip("xpgym.adapters.verl", reason="needs verl 0.9.x", exc_type=ImportError)
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.workers.rollout.replica import TokenOutput

    from xpgym.adapters.verl import XpgymAgentLoop, dataset_rows

    class LocalServer:
        async def generate(
            self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kw: Any
        ) -> TokenOutput:
            g = await scripted_generate(prompt_ids, sampling_params["max_tokens"])
            return TokenOutput(token_ids=g.token_ids, log_probs=g.logprobs)

    config = OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"name": "vllm", "prompt_length": 4096, "response_length": 4096}
            },
            "trainer": {"use_v1": True},
            "algorithm": {"gamma": 1.0},
            "data": {},
        }
    )
    loop = XpgymAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=LocalServer(),
        tokenizer=tiny_tokenizer(),
        processor=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
    )

    def play(task: EpisodeTask) -> tuple[float | None, bool]:
        [row] = dataset_rows([task], max_turns=MAX_TURNS, max_new_tokens=16)
        out = asyncio.run(loop.run({"temperature": 1.0}, **row, raw_prompt=row["prompt"]))
        fields = out.extra_fields
        return fields["xpgym_metrics"][LEVEL_METRIC], fields["turn_scores"][-1] == 1.0

    check_hook(curriculum, play)


def test_openrlhf_agent_executor_plays_and_feeds_the_shared_curriculum(
    curriculum: SharedCurriculum,
) -> None:
    pytest.importorskip(
        "xpgym.adapters.openrlhf", reason="needs openrlhf 0.11.x", exc_type=ImportError
    )
    from xpgym.adapters.openrlhf import AgentExecutor, make_label

    class LocalEngine:
        async def generate(
            self, token_ids: list[int], sampling_params: Any, multi_modal_data: Any = None
        ) -> Any:
            g = await scripted_generate(token_ids, sampling_params.max_tokens)
            steps = [
                {t: types.SimpleNamespace(logprob=lp)}
                for t, lp in zip(g.token_ids, g.logprobs, strict=True)
            ]
            output = types.SimpleNamespace(
                token_ids=g.token_ids, text=g.text, finish_reason="stop", logprobs=steps
            )
            return types.SimpleNamespace(outputs=[output])

    executor, tokenizer = AgentExecutor(), tiny_tokenizer()
    params = types.SimpleNamespace(max_tokens=16, logprobs=1, temperature=1.0)
    metric = LEVEL_METRIC.removeprefix("metrics/")

    def play(task: EpisodeTask) -> tuple[float | None, bool]:
        label = make_label(task, max_turns=MAX_TURNS, metric_keys=[metric])
        out = asyncio.run(executor.execute("p", label, params, 4096, tokenizer, LocalEngine()))
        return out["extra_logs"][LEVEL_METRIC], out["reward"] == 1.0

    check_hook(curriculum, play)


def test_rl2_env_module_plays_and_feeds_the_shared_curriculum(
    curriculum: SharedCurriculum, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("xpgym.adapters.rl2", reason="needs rl-square 0.0.2", exc_type=ImportError)
    from xpgym.adapters import rl2

    monkeypatch.setitem(rl2._TOKENIZERS, "tiny", tiny_tokenizer())

    def play(task: EpisodeTask) -> tuple[float | None, bool]:
        async def run() -> tuple[float | None, bool]:  # RL2's calls for one sample
            state, info = await rl2.reset(
                rl2.make_extra_info(task, tokenizer="tiny", max_turns=MAX_TURNS)
            )
            for turn in range(MAX_TURNS):
                response = await rl2.step(state, guess_text(turn), info)
                if response["done"]:
                    metrics = response["extra_info"][rl2.METRICS_KEY]
                    return metrics[LEVEL_METRIC], response["reward"] == 1.0
                state, info = response["next_state"], response["extra_info"]
            raise AssertionError("the episode did not end")

        return asyncio.run(run())

    check_hook(curriculum, play)


def test_roll_gem_env_plays_and_feeds_the_shared_curriculum(curriculum: SharedCurriculum) -> None:
    pytest.importorskip("xpgym.adapters.roll", reason="needs gem-llm 0.0.4", exc_type=ImportError)
    import gem

    from xpgym.adapters.roll import register_gem_envs

    [gem_id] = register_gem_envs([f"{FAMILY}-easy"])
    env = gem.make(gem_id, curriculum=str(curriculum.path))  # ROLL's env config

    def play(task: EpisodeTask) -> tuple[float | None, bool]:
        _, info = env.reset(seed=task.seed)
        level = info["curriculum"]["level"]
        for turn in range(MAX_TURNS):
            _, reward, terminated, truncated, info = env.step(guess_text(turn))
            if terminated or truncated:
                return level, reward == 1.0
        raise AssertionError("the episode did not end")

    check_hook(curriculum, play)
    with pytest.raises(ValueError, match="set by its ladder"):
        gem.make(gem_id, curriculum=str(curriculum.path), max_number=5)
