"""Specification of `xpgym.rollout.runner`: one episode inside a trainer's rollout."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

pytest.importorskip("transformers", reason="the runner tests build prompts with a tokenizer")

from hang_guard import HANG_GUARD_S
from random_byte_lm import EOS_ID, tiny_tokenizer
from toy_envs import ToyEnv

from xpgym.core.chat import ChatPromptBuilder
from xpgym.rollout.env_pool import EnvPool
from xpgym.rollout.policies import Generation
from xpgym.rollout.runner import (
    EpisodeTask,
    LiveEpisodes,
    generation_from_ids,
    make_tasks,
    policy_generate,
    run_episode,
    shared_prompt_builder,
    task_env_pool,
)
from xpgym.training.layouts import episode_rows

TOKENIZER = tiny_tokenizer()
BUILDER = ChatPromptBuilder(TOKENIZER)


class Scripted:
    """An engine that answers the given texts in order (stop token appended) and records
    every call's prompt length and budget."""

    def __init__(self, texts: list[str], *, finish_reason: str = "stop") -> None:
        self.texts = list(texts)
        self.finish_reason = finish_reason
        self.calls: list[tuple[int, int]] = []

    async def __call__(self, prompt_ids: list[int], max_new_tokens: int) -> Generation:
        self.calls.append((len(prompt_ids), max_new_tokens))
        text = self.texts.pop(0)
        ids = TOKENIZER.encode(text, add_special_tokens=False)
        if self.finish_reason == "stop":
            ids = [*ids, EOS_ID]
        return Generation(
            text=text,
            finish_reason=self.finish_reason,  # type: ignore[arg-type]
            token_ids=ids,
            logprobs=[-0.5] * len(ids),
        )


def play(env: Any, task: EpisodeTask, engine: Scripted, **kwargs: Any):
    return asyncio.run(run_episode(env, task, engine, BUILDER, **{"max_new_tokens": 64, **kwargs}))


def secret_of(seed: int) -> int:
    env = ToyEnv()
    env.reset(seed=seed)
    return env.secret


def test_a_tasks_recorder_tags_the_episode_with_the_task() -> None:
    task = EpisodeTask("toy", 3, "g7")
    recorder = task.recorder({"level": 1}, max_turns=2, system_prompt="Be brief.")
    episode = recorder.episode
    assert (episode.env_id, episode.seed, episode.group_id) == ("toy", 3, "g7")
    assert episode.info == {"reset_info": {"level": 1}}
    assert recorder.limit.max_turns == 2
    assert recorder.first_messages("hi")[0] == {"role": "system", "content": "Be brief."}


def test_episode_records_turns_with_token_ids_rewards_and_task() -> None:
    task = EpisodeTask("toy", seed=7, group_id="g")
    wrong = str((secret_of(7) + 1) % 10)
    episode = play(ToyEnv(episode_length=3), task, Scripted([wrong, str(secret_of(7))]))
    assert (episode.env_id, episode.seed, episode.group_id) == ("toy", 7, "g")
    assert [t.reward for t in episode.turns] == [-0.1, 1.0]
    assert [t.action for t in episode.turns] == [wrong, str(secret_of(7))]
    assert episode.turns[-1].terminated
    assert episode.complete
    assert episode.turns[1].observation == f"turn=1 last={wrong}"
    assert episode.turns[0].response_logprobs == [-0.5] * len(episode.turns[0].response_ids)
    assert episode.info["reset_info"] == {"secret_parity": secret_of(7) % 2}
    # token-exact prompts: the episode lays out as one row, env tokens masked
    rows = episode_rows([episode])
    assert int(rows.response_mask.sum()) == sum(len(t.response_ids) for t in episode.turns)


def test_second_prompt_extends_the_first_prompt_and_response() -> None:
    episode = play(ToyEnv(), EpisodeTask("toy", 3, "g"), Scripted(["x", "y", "z"]))
    first, second = episode.turns[0], episode.turns[1]
    assert second.prompt_ids[: len(first.prompt_ids) + len(first.response_ids)] == (
        first.prompt_ids + first.response_ids
    )
    assert TOKENIZER.decode(second.prompt_ids).endswith(
        "<|im_start|>user\nturn=1 last=x<|im_end|>\n<|im_start|>assistant\n"
    )


def test_same_task_gives_the_same_start_state() -> None:
    task = EpisodeTask("toy", 11, "g")
    one = play(ToyEnv(), task, Scripted(["a", "b", "c"]))
    two = play(ToyEnv(), task, Scripted(["a", "b", "c"]))
    assert one.turns[0].prompt_ids == two.turns[0].prompt_ids
    assert [t.reward for t in one.turns] == [t.reward for t in two.turns]


def test_max_turns_truncates_the_last_turn() -> None:
    episode = play(
        ToyEnv(episode_length=9), EpisodeTask("toy", 1, "g"), Scripted(["a", "b"]), max_turns=2
    )
    assert len(episode.turns) == 2
    assert episode.turns[-1].truncated
    assert not episode.turns[-1].terminated
    assert episode.turns[-1].info["truncated_reason"] == "max_turns"
    assert episode.info["truncated_reason"] == "max_turns"


def test_response_budget_counts_env_tokens_and_ends_the_episode() -> None:
    engine = Scripted(["a"] * 5)
    episode = play(
        ToyEnv(episode_length=9), EpisodeTask("toy", 1, "g"), engine, max_response_tokens=40
    )
    first_prompt = len(episode.turns[0].prompt_ids)
    # every call's budget is what is left of the 40 tokens after the first prompt
    for prompt_length, budget in engine.calls:
        assert budget == min(64, 40 - (prompt_length - first_prompt))
    assert episode.info["truncated_reason"] == "context"
    assert episode.turns[-1].truncated
    used = len(episode.turns[-1].prompt_ids) + len(episode.turns[-1].response_ids) - first_prompt
    assert used <= 40


def test_total_budget_too_small_for_the_first_prompt_raises() -> None:
    with pytest.raises(ValueError, match="leaves no room to generate"):
        play(ToyEnv(), EpisodeTask("toy", 1, "g"), Scripted(["a"]), max_total_tokens=5)


def test_cut_generation_is_flagged_and_sent_as_is() -> None:
    episode = play(
        ToyEnv(episode_length=1),
        EpisodeTask("toy", 1, "g"),
        Scripted(["4"], finish_reason="length"),
    )
    assert episode.turns[0].info["generation_truncated"] is True
    assert episode.turns[0].action == "4"


def test_system_prompt_is_prepended() -> None:
    episode = play(
        ToyEnv(episode_length=1),
        EpisodeTask("toy", 1, "g"),
        Scripted(["4"]),
        system_prompt="Be brief.",
    )
    assert TOKENIZER.decode(episode.turns[0].prompt_ids).startswith(
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nstart parity="
    )


def test_task_json_round_trip_and_refusals() -> None:
    task = EpisodeTask("game:X-v0", 5, "grp", {"size": 3})
    assert EpisodeTask.from_json(task.to_json()) == task
    assert EpisodeTask.from_json({"env_id": "a", "seed": 1, "group_id": "g"}).env_kwargs == {}
    with pytest.raises(ValueError, match="unknown EpisodeTask keys"):
        EpisodeTask.from_json('{"env_id": "a", "seed": 1, "group_id": "g", "n": 2}')
    with pytest.raises(ValueError, match="seed must be"):
        EpisodeTask("a", -1, "g")


def test_make_tasks_derives_distinct_seeds_and_group_ids() -> None:
    tasks = make_tasks("game:GuessTheNumber-v0-easy", 3, seed=4)
    assert len({t.seed for t in tasks}) == 3
    assert [t.group_id for t in tasks] == [f"game:GuessTheNumber-v0-easy/4/{i}" for i in range(3)]
    assert make_tasks("game:GuessTheNumber-v0-easy", 2, seed=4) == tasks[:2]


def test_task_env_pool_reuses_released_envs_across_tasks_of_one_env() -> None:
    pool = task_env_pool()
    task = make_tasks("game:GuessTheNumber-v0-easy", 1)[0]
    env = pool.acquire(task)
    assert pool.acquire(task) is not env  # in use: a new one
    pool.release(task, env)
    other_seed = make_tasks("game:GuessTheNumber-v0-easy", 2, seed=9)[1]
    assert pool.acquire(other_seed) is env  # same env id and kwargs


def test_shared_prompt_builder_is_one_per_tokenizer_and_template_kwargs() -> None:
    builder = shared_prompt_builder(TOKENIZER)
    assert shared_prompt_builder(TOKENIZER, chat_template_kwargs={}) is builder
    assert builder.tokenizer is TOKENIZER
    thinking = shared_prompt_builder(TOKENIZER, chat_template_kwargs={"enable_thinking": False})
    assert thinking is not builder
    assert thinking.chat_template_kwargs == {"enable_thinking": False}
    assert shared_prompt_builder(tiny_tokenizer()) is not builder  # another tokenizer object


def test_generation_from_ids_infers_the_finish_reason() -> None:
    hello = TOKENIZER.encode("hi", add_special_tokens=False)
    stopped = generation_from_ids(
        TOKENIZER, [*hello, EOS_ID], logprobs=None, stop_token_ids=[EOS_ID], max_new_tokens=8
    )
    assert (stopped.text, stopped.finish_reason) == ("hi", "stop")
    assert stopped.token_ids == [*hello, EOS_ID]
    cut = generation_from_ids(
        TOKENIZER, hello, logprobs=[-1, -2], stop_token_ids=[EOS_ID], max_new_tokens=2
    )
    assert (cut.text, cut.finish_reason, cut.logprobs) == ("hi", "length", [-1.0, -2.0])
    short = generation_from_ids(
        TOKENIZER, hello, logprobs=None, stop_token_ids=[EOS_ID], max_new_tokens=8
    )
    assert short.finish_reason == "stop"  # ended early without a stop token: a stop string


def test_policy_generate_cuts_to_the_budget() -> None:
    class Policy:
        tokenizer = TOKENIZER

        def generate(self, prompts: list[Any]) -> list[Generation]:
            ids = [*TOKENIZER.encode("abcdef", add_special_tokens=False), EOS_ID]
            return [Generation("abcdef", "stop", ids, [-0.1] * len(ids)) for _ in prompts]

    generate = policy_generate(Policy())  # type: ignore[arg-type]
    full = asyncio.run(generate([1, 2], 16))
    assert full.text == "abcdef"
    cut = asyncio.run(generate([1, 2], 3))
    assert (cut.text, cut.finish_reason, len(cut.logprobs or [])) == ("abc", "length", 3)


# --------------------------------------------------------------------------------------
# LiveEpisodes: an episode kept between a trainer's calls (RL2's env module)
# --------------------------------------------------------------------------------------

TASK = EpisodeTask("toy", 5, "g")


def answer(text: str) -> Generation:
    ids = [*TOKENIZER.encode(text, add_special_tokens=False), EOS_ID]
    return Generation(text=text, finish_reason="stop", token_ids=ids)


def toy_pool(make: Any = lambda: ToyEnv(episode_length=2)) -> EnvPool[EpisodeTask, Any]:
    return EnvPool(lambda task: make(), key=lambda task: task.env_id)


def counts(episodes: LiveEpisodes) -> tuple[int, int, int]:
    """(episodes in play, envs leased, envs idle)."""
    return len(episodes), episodes.pool.num_leased, episodes.pool.num_idle


def test_live_episode_played_to_its_end_gives_its_env_back() -> None:
    episodes = LiveEpisodes(toy_pool())

    async def sample() -> list[bool]:
        key = await episodes.start(TASK, BUILDER)
        assert counts(episodes) == (1, 1, 0)
        return [await episodes.play(key, answer("x")), await episodes.play(key, answer("y"))]

    assert asyncio.run(sample()) == [False, True]  # episode_length 2
    assert counts(episodes) == (0, 0, 1)


def test_an_episode_its_task_drops_gives_its_env_back_when_the_task_ends() -> None:
    episodes = LiveEpisodes(toy_pool(lambda: ToyEnv(episode_length=9)))
    held: list[Any] = []

    async def sample(raise_after: bool) -> None:
        key = await episodes.start(TASK, BUILDER)
        held.append(episodes[key].env)
        assert not await episodes.play(key, answer("x"))  # the episode goes on
        if raise_after:
            raise ConnectionError("the trainer's engine went away")

    async def rollout() -> list[Any]:
        return await asyncio.gather(sample(False), sample(True), return_exceptions=True)

    outcomes = asyncio.run(rollout())
    assert outcomes[0] is None
    assert isinstance(outcomes[1], ConnectionError)
    assert counts(episodes) == (0, 0, 2)
    assert [env.closed for env in held] == [0, 0]


def test_a_play_that_raises_closes_its_env() -> None:
    episodes = LiveEpisodes(toy_pool())
    held: list[Any] = []

    async def sample() -> None:
        key = await episodes.start(TASK, BUILDER)
        held.append(episodes[key].env)
        await episodes.play(key, Generation(text="x", token_ids=None))

    with pytest.raises(ValueError, match="without token_ids"):
        asyncio.run(sample())
    assert counts(episodes) == (0, 0, 0)
    assert held[0].closed == 1


class GatedEnv(ToyEnv):
    """`ToyEnv` whose step of ``"wait"`` sets `entered`, then waits for `gate`."""

    def __init__(self) -> None:
        super().__init__(episode_length=9)
        self.entered = threading.Event()
        self.gate = threading.Event()

    def step(self, action: str):
        if action == "wait":
            self.entered.set()
            self.gate.wait(HANG_GUARD_S)
        return super().step(action)


def test_a_play_cancelled_mid_step_closes_its_env() -> None:
    env = GatedEnv()
    episodes = LiveEpisodes(toy_pool(lambda: env))

    async def sample() -> None:
        key = await episodes.start(TASK, BUILDER)
        await episodes.play(key, answer("wait"))

    async def rollout() -> tuple[int, int, int]:
        player = asyncio.create_task(sample())
        assert await asyncio.to_thread(env.entered.wait, HANG_GUARD_S)
        player.cancel()  # the step goes on in its worker thread
        with pytest.raises(asyncio.CancelledError):
            await player
        seen = counts(episodes)
        env.gate.set()  # let the abandoned step finish
        return seen

    assert asyncio.run(rollout()) == (0, 0, 0)
    assert env.closed == 1


def test_a_reset_that_raises_closes_its_env() -> None:
    class ResetFails(ToyEnv):
        def reset(self, *, seed: int | None = None, options: Any = None):
            raise OSError("dataset missing")

    env = ResetFails()
    episodes = LiveEpisodes(toy_pool(lambda: env))
    with pytest.raises(OSError, match="dataset missing"):
        asyncio.run(episodes.start(TASK, BUILDER))
    assert counts(episodes) == (0, 0, 0)
    assert env.closed == 1


def test_a_play_from_another_task_than_the_start_is_refused() -> None:
    episodes = LiveEpisodes(toy_pool())

    async def run() -> None:
        key = await asyncio.create_task(episodes.start(TASK, BUILDER))
        await episodes.play(key, answer("x"))

    with pytest.raises(RuntimeError, match="one asyncio task"):
        asyncio.run(run())
