"""The rollout collector: complete episodes, exact token bookkeeping, groups, limits, scheduling."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hang_guard import HANG_GUARD_S
from toy_envs import ToyEnv

import xpgym
from xpgym.core.chat import Prompt
from xpgym.core.env import Env, Wrapper
from xpgym.core.trajectory import Episode, Turn
from xpgym.core.vector import AutoresetMode, SubEnvError, SyncVectorEnv, derive_seeds
from xpgym.core.wrappers import ChatMessages, EpisodeStatistics
from xpgym.rollout.collector import RolloutCollector, collect_episodes
from xpgym.rollout.policies import ContextLengthError, Generation
from xpgym.training.layouts import episode_rows

EASY = "game:GuessTheNumber-v0-easy"
HARD = "game:GuessTheNumber-v0-hard"
_RANGE = re.compile(r"from (-?\d+) to (-?\d+)")
_GUESS = re.compile(r"\\boxed\{(-?\d+)\}")


# -- scripted policies --------------------------------------------------------------------


def binary_search_guess(messages: Sequence[dict[str, str]]) -> int:
    """The next binary-search guess for a GuessTheNumber conversation."""
    lo, hi = map(int, _RANGE.search(messages[0]["content"]).groups())
    guess = None
    for message in messages[1:]:
        if message["role"] == "assistant":
            guess = int(_GUESS.search(message["content"]).group(1))
        elif "higher" in message["content"]:
            lo = guess + 1
        elif "lower" in message["content"]:
            hi = guess - 1
    return (lo + hi) // 2


def guess_text(guess: int) -> str:
    return f"My guess: \\boxed{{{guess}}}"


class BinarySearchPolicy:
    """A batched policy over chat messages that plays GuessTheNumber by binary search."""

    tokenizer = None

    def __init__(self) -> None:
        self.batches: list[int] = []

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        self.batches.append(len(prompts))
        return [Generation(text=guess_text(binary_search_guess(p))) for p in prompts]


class ConcurrentBinarySearch(BinarySearchPolicy):
    """The same player behind `submit`, on a thread pool; `first_request_gate`, when set,
    holds the very first request until the event is set (or the hang guard gives up)."""

    def __init__(self, first_request_gate: threading.Event | None = None) -> None:
        super().__init__()
        self.pool = ThreadPoolExecutor(4)
        self.gate = first_request_gate
        self.gate_opened = False  # the first request was released by the gate, not a timeout
        self.submitted = 0
        self.completed = 0
        self.lock = threading.Lock()

    def submit(self, prompt: Prompt) -> Future[Generation]:
        self.submitted += 1
        first = self.submitted == 1
        return self.pool.submit(self._answer, prompt, first)

    def _answer(self, prompt: Prompt, first: bool) -> Generation:
        if first and self.gate is not None:
            self.gate_opened = self.gate.wait(HANG_GUARD_S)
        with self.lock:
            self.completed += 1
        return Generation(text=guess_text(binary_search_guess(prompt)))


def expected_binary_search(env_id: str, seed: int, group_id: str) -> Episode:
    """The episode binary search plays on a fresh env reset with `seed`."""
    env = xpgym.make(env_id)
    obs, reset_info = env.reset(seed=seed)
    lo, hi = reset_info["min_number"], reset_info["max_number"]
    turns = []
    while True:
        guess = (lo + hi) // 2
        next_obs, reward, terminated, truncated, info = env.step(guess_text(guess))
        turns.append(Turn(obs, guess_text(guess), reward, terminated, truncated, info))
        if terminated or truncated:
            return Episode(env_id, seed, group_id, turns, info={"reset_info": reset_info})
        lo, hi = (guess + 1, hi) if "higher" in next_obs else (lo, guess - 1)
        obs = next_obs


# -- helpers ------------------------------------------------------------------------------


@pytest.fixture
def make_vec():
    envs = []

    def build(env_ids=EASY, num_envs=3, mode="sync", **kwargs: Any):
        envs.append(xpgym.make_vec(env_ids, num_envs, vectorization_mode=mode, **kwargs))
        return envs[-1]

    yield build
    for env in envs:
        env.close()


def assert_prefix_consistent(episode: Episode) -> None:
    for previous, turn in zip(episode.turns, episode.turns[1:], strict=False):
        head = previous.prompt_ids + previous.response_ids
        assert turn.prompt_ids[: len(head)] == head


class ShowTarget(Wrapper):
    """Appends the hidden number to the reset observation (to see a group's start state)."""

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return f"{obs} [target {self.unwrapped.target}]", info


# -- scripted episodes --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "thread", "process"])
def test_binary_search_gives_the_expected_episodes_exactly(make_vec, mode):
    vec = make_vec(num_envs=2, mode=mode)
    episodes = collect_episodes(vec, BinarySearchPolicy(), num_episodes=5, seed=11)
    seeds = derive_seeds(11, 5)
    assert episodes == [expected_binary_search(EASY, seeds[g], f"11-{g}") for g in range(5)]
    assert all(e.total_reward == 1.0 for e in episodes)


@pytest.mark.parametrize("autoreset_mode", ["NextStep", "SameStep", "Disabled"])
def test_every_autoreset_mode_gives_the_same_episodes(make_vec, autoreset_mode):
    vec = make_vec(num_envs=2, vector_kwargs={"autoreset_mode": autoreset_mode})
    episodes = collect_episodes(vec, BinarySearchPolicy(), num_episodes=4, seed=5)
    seeds = derive_seeds(5, 4)
    assert episodes == [expected_binary_search(EASY, seeds[g], f"5-{g}") for g in range(4)]


class CountResets(Wrapper):
    """Counts the resets of the env it wraps."""

    def __init__(self, env: Env) -> None:
        super().__init__(env)
        self.resets = 0

    def reset(self, *, seed=None, options=None):
        self.resets += 1
        return self.env.reset(seed=seed, options=options)


@pytest.mark.parametrize("autoreset_mode", ["NextStep", "SameStep", "Disabled"])
def test_the_collector_resets_once_per_episode_and_gives_the_mode_back(autoreset_mode):
    envs = [CountResets(xpgym.make(EASY)) for _ in range(2)]
    vec = SyncVectorEnv(
        [functools.partial(lambda env: env, env) for env in envs], autoreset_mode=autoreset_mode
    )
    collect_episodes(vec, BinarySearchPolicy(), num_episodes=5, seed=2)
    assert sum(env.resets for env in envs) == 5  # autoreset is off while it collects
    assert vec.autoreset_mode is AutoresetMode(autoreset_mode)
    assert vec.metadata["autoreset_mode"] is vec.autoreset_mode


def test_episodes_do_not_depend_on_num_envs_or_backend(make_vec):
    reference = collect_episodes(
        make_vec(num_envs=1), BinarySearchPolicy(), num_episodes=6, group_size=2, seed=3
    )
    for num_envs, mode in [(4, "sync"), (3, "thread")]:
        vec = make_vec(num_envs=num_envs, mode=mode)
        assert (
            collect_episodes(vec, BinarySearchPolicy(), num_episodes=6, group_size=2, seed=3)
            == reference
        )


def test_a_batched_policy_gets_every_waiting_sub_env_in_one_call(make_vec):
    policy = BinarySearchPolicy()
    collect_episodes(make_vec(num_envs=3), policy, num_episodes=3, seed=0)
    assert policy.batches[0] == 3
    assert sum(policy.batches) == sum(  # one prompt per turn, nothing generated twice
        len(expected_binary_search(EASY, s, "").turns) for s in derive_seeds(0, 3)
    )


def test_returns_exactly_the_requested_complete_episodes(make_vec):
    episodes = collect_episodes(make_vec(num_envs=3), BinarySearchPolicy(), num_episodes=7)
    assert len(episodes) == 7
    assert all(e.complete for e in episodes)
    assert collect_episodes(make_vec(), BinarySearchPolicy(), num_episodes=0) == []


def test_a_concurrent_policy_gives_the_same_episodes(make_vec):
    policy = ConcurrentBinarySearch()
    episodes = collect_episodes(make_vec(num_envs=3), policy, num_episodes=6, group_size=2, seed=4)
    reference = collect_episodes(
        make_vec(num_envs=3), BinarySearchPolicy(), num_episodes=6, group_size=2, seed=4
    )
    assert episodes == reference
    assert policy.batches == []  # only submit() was used


def test_a_slow_generation_does_not_hold_up_other_sub_envs(make_vec):
    gate = threading.Event()
    policy = ConcurrentBinarySearch(first_request_gate=gate)
    collector = RolloutCollector(make_vec(num_envs=3), policy)
    original_step = collector._step

    def step(state, generations):
        if policy.completed >= 6:  # others finished many turns while the first one waited
            gate.set()
        original_step(state, generations)

    collector._step = step  # type: ignore[method-assign]
    episodes = collector.collect(6, seed=1)
    assert policy.gate_opened
    assert len(episodes) == 6
    assert all(e.total_reward == 1.0 for e in episodes)


# -- groups -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "thread"])
def test_a_group_starts_from_one_state(make_vec, mode):
    vec = make_vec(num_envs=3, mode=mode, wrappers=[ShowTarget])
    episodes = collect_episodes(vec, BinarySearchPolicy(), num_episodes=8, group_size=4, seed=2)
    for g in range(2):
        group = episodes[4 * g : 4 * g + 4]
        assert len({e.group_id for e in group}) == 1
        assert len({e.seed for e in group}) == 1
        assert len({e.turns[0].observation for e in group}) == 1
        assert len({tuple(t.action for t in e.turns) for e in group}) == 1
    assert episodes[0].group_id != episodes[4].group_id


def test_groups_larger_than_the_vector_env_run_in_turns(make_vec):
    vec = make_vec(num_envs=2, wrappers=[ShowTarget])
    episodes = collect_episodes(vec, BinarySearchPolicy(), num_episodes=6, group_size=3, seed=8)
    for g in range(2):
        assert len({repr(e.turns) for e in episodes[3 * g : 3 * g + 3]}) == 1


def test_group_members_restore_wrapper_history(make_vec):
    vec = make_vec(num_envs=2, wrappers=[functools.partial(ChatMessages, system_prompt="Play.")])
    policy = BinarySearchPolicy()
    policy.generate = (
        lambda prompts: [  # type: ignore[method-assign]
            Generation(text=guess_text(binary_search_guess(p[1:]))) for p in prompts
        ]
    )
    episodes = collect_episodes(vec, policy, num_episodes=4, group_size=4, seed=6)
    for episode in episodes:
        assert episode.turns[0].observation[0] == {"role": "system", "content": "Play."}
        assert len(episode.turns[-1].observation) == 2 * len(episode.turns)  # history kept
    assert len({repr(e.turns) for e in episodes}) == 1


def test_groups_stay_on_one_env_id_in_a_mixed_vector_env(make_vec):
    vec = make_vec([EASY, HARD, EASY], num_envs=None)
    episodes = collect_episodes(vec, BinarySearchPolicy(), num_episodes=12, group_size=3, seed=0)
    for g in range(4):
        assert len({e.env_id for e in episodes[3 * g : 3 * g + 3]}) == 1
    assert {e.env_id for e in episodes} <= {EASY, HARD}


def test_episode_statistics_are_lifted_into_episode_info(make_vec):
    vec = make_vec(num_envs=2, wrappers=[EpisodeStatistics])
    episodes = collect_episodes(vec, BinarySearchPolicy(), num_episodes=2, group_size=2, seed=0)
    for episode in episodes:
        assert episode.info["episode"]["length"] == len(episode.turns)
        assert episode.info["episode"]["return"] == episode.total_reward
        assert episode.info["reset_info"]["max_number"] == 10


class Constant:
    """A batched policy that always writes `text`."""

    tokenizer = None

    def __init__(self, text: str = "ok") -> None:
        self.text = text

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        return [Generation(text=self.text) for _ in prompts]


class NoSnapshots(Env):
    """A one-step env without get_state/set_state."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "Say anything.", {}

    def step(self, action):
        return "Done.", 1.0, True, False, {}


def test_groups_need_env_snapshots_and_say_so():
    with SyncVectorEnv([NoSnapshots]) as vec:
        assert len(collect_episodes(vec, Constant(), num_episodes=2)) == 2
        with pytest.raises(SubEnvError, match=r"needs envs .* get_state\(\)/set_state\(\)"):
            collect_episodes(vec, Constant(), num_episodes=2, group_size=2)


def test_num_episodes_must_be_a_multiple_of_group_size(make_vec):
    with pytest.raises(ValueError, match="multiple of group_size"):
        collect_episodes(make_vec(), BinarySearchPolicy(), num_episodes=5, group_size=2)


# -- token-exact episodes with a tiny LM --------------------------------------------------


@pytest.fixture(scope="module")
def lm():
    random_byte_lm = pytest.importorskip("random_byte_lm", reason="needs torch and transformers")
    from xpgym.rollout.policies.hf import HFPolicy

    def build(**kwargs: Any) -> HFPolicy:
        settings = {"max_new_tokens": 8, "seed": 0, **kwargs}
        return HFPolicy(random_byte_lm.tiny_model(0), random_byte_lm.tiny_tokenizer(), **settings)

    return build


class Counting:
    """Wraps a policy and counts the prompts it was given."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.tokenizer = policy.tokenizer
        self.prompts: list[Prompt] = []

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        self.prompts.extend(prompts)
        return self.policy.generate(prompts)


@pytest.mark.parametrize("mode", ["sync", "thread"])
def test_tiny_lm_episodes_are_complete_and_token_exact(make_vec, lm, mode):
    policy = lm(stop_token_ids=[10, 258])  # "\n" stops some generations early
    vec = make_vec(num_envs=3, mode=mode)
    collector = RolloutCollector(vec, policy, system_prompt="Play.")
    assert collector.prompt_mode == "tokens"
    episodes = collector.collect(6, group_size=2, seed=1)
    assert len(episodes) == 6
    assert all(e.complete for e in episodes)
    for episode in episodes:
        assert_prefix_consistent(episode)
        for turn in episode.turns:
            assert len(turn.response_logprobs) == len(turn.response_ids) <= 8
            assert all(math.isfinite(x) and x <= 0 for x in turn.response_logprobs)
            stopped = turn.response_ids[-1] in (10, 258)
            assert turn.info.get("generation_truncated", False) is not stopped
            text_ids = turn.response_ids[:-1] if stopped else turn.response_ids
            assert turn.action == policy.tokenizer.decode(text_ids, skip_special_tokens=True)
    rows = episode_rows(episodes)  # raises on any prefix mismatch
    assert len(rows) == 6
    flags = {t.info.get("generation_truncated", False) for e in episodes for t in e.turns}
    assert flags == {True, False}  # both kinds of ending were exercised


def test_first_prompt_is_the_chat_template_rendering(make_vec, lm):
    policy = lm()
    episodes = collect_episodes(
        make_vec(num_envs=1), policy, num_episodes=1, seed=0, system_prompt="Play."
    )
    first = episodes[0].turns[0]
    messages = [
        {"role": "system", "content": "Play."},
        {"role": "user", "content": first.observation},
    ]
    expected = policy.tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    assert policy.tokenizer.decode(first.prompt_ids) == expected


def test_env_tokens_between_turns_close_the_reply_and_render_the_observation(make_vec, lm):
    policy = lm()
    (episode,) = collect_episodes(make_vec(num_envs=1), policy, num_episodes=1, seed=0)
    first, second = episode.turns[:2]
    added = second.prompt_ids[len(first.prompt_ids) + len(first.response_ids) :]
    assert first.info["generation_truncated"]  # no <|im_end|> sampled: the template adds it
    assert policy.tokenizer.decode(added) == (
        f"<|im_end|>\n<|im_start|>user\n{second.observation}<|im_end|>\n<|im_start|>assistant\n"
    )


def test_group_members_sample_different_replies(make_vec, lm):
    episodes = collect_episodes(
        make_vec(num_envs=2, wrappers=[ShowTarget]), lm(), num_episodes=4, group_size=4, seed=3
    )
    assert len({e.turns[0].observation for e in episodes}) == 1
    assert len({tuple(e.turns[0].response_ids) for e in episodes}) == 4


def test_tiny_lm_collection_is_reproducible(make_vec, lm):
    first = collect_episodes(make_vec(num_envs=2), lm(), num_episodes=4, group_size=2, seed=9)
    again = collect_episodes(make_vec(num_envs=2), lm(), num_episodes=4, group_size=2, seed=9)
    assert first == again


def test_token_episodes_round_trip_through_json(make_vec, lm):
    episodes = collect_episodes(make_vec(num_envs=2), lm(), num_episodes=2, seed=0)
    for episode in episodes:
        assert Episode.from_json(episode.to_json()) == episode


class NumpyIds(Counting):
    """Reports each generation's token ids as a numpy array (a policy may)."""

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        return [
            dataclasses.replace(g, token_ids=np.array(g.token_ids, dtype=np.int64))
            for g in super().generate(prompts)
        ]


def test_token_episodes_record_plain_int_ids_whatever_ints_the_policy_gives(make_vec, lm):
    policy = NumpyIds(lm())
    episodes = collect_episodes(make_vec(num_envs=2), policy, num_episodes=3, seed=0)
    turns = [turn for episode in episodes for turn in episode.turns]
    assert len(turns) > len(episodes)  # later turns' prompts hold earlier responses
    for turn in turns:
        assert type(turn.prompt_ids) is list
        assert type(turn.response_ids) is list
        assert {type(t) for t in turn.prompt_ids + turn.response_ids} == {int}
    assert len({id(turn.prompt_ids) for turn in turns}) == len(turns)  # no list shared
    for episode in episodes:
        assert_prefix_consistent(episode)


def test_chat_message_observations_add_only_the_new_messages(make_vec, lm):
    policy = lm()
    vec = make_vec(num_envs=1, wrappers=[functools.partial(ChatMessages, system_prompt="Sys")])
    (episode,) = collect_episodes(vec, policy, num_episodes=1, seed=0)
    assert_prefix_consistent(episode)
    rendered = policy.tokenizer.apply_chat_template(
        episode.turns[0].observation, tokenize=False, add_generation_prompt=True
    )
    assert policy.tokenizer.decode(episode.turns[0].prompt_ids) == rendered
    second = policy.tokenizer.decode(episode.turns[1].prompt_ids)
    assert second.count("<|im_start|>system") == 1
    assert second.endswith(
        f"user\n{episode.turns[1].observation[-1]['content']}<|im_end|>\n<|im_start|>assistant\n"
    )


def test_observation_mode_records_the_ids_the_policy_reports(make_vec, lm):
    policy = lm()
    episodes = collect_episodes(
        make_vec(num_envs=2), policy, num_episodes=2, seed=0, prompt_mode="observation"
    )
    for turn in episodes[0].turns:
        assert turn.prompt_ids == policy.tokenizer.encode(turn.observation)


# -- limits -------------------------------------------------------------------------------


def test_max_turns_truncates_the_last_turn(make_vec, lm):
    episodes = collect_episodes(make_vec(num_envs=2), lm(), num_episodes=3, max_turns=2, seed=0)
    for episode in episodes:
        assert len(episode.turns) == 2  # the random LM never guesses right
        assert episode.turns[-1].truncated
        assert episode.turns[-1].info["truncated_reason"] == "max_turns"
        assert episode.info["truncated_reason"] == "max_turns"


def test_an_over_long_prompt_ends_the_episode_without_calling_the_policy(make_vec, lm):
    policy = Counting(lm())
    probe = collect_episodes(make_vec(num_envs=1), lm(), num_episodes=1, seed=0)[0]
    budget = len(probe.turns[1].prompt_ids) - 1  # turn 0 fits, turn 1 does not
    episodes = collect_episodes(
        make_vec(num_envs=2), policy, num_episodes=3, seed=0, max_prompt_tokens=budget
    )
    assert len(policy.prompts) == 3  # one generation per episode, none for the long prompt
    for episode in episodes:
        (turn,) = episode.turns
        assert turn.truncated
        assert not turn.terminated
        assert turn.info["truncated_reason"] == "context"
        assert episode.info["truncated_reason"] == "context"


def test_a_first_prompt_over_the_budget_gives_a_placeholder_turn(make_vec, lm):
    policy = Counting(lm())
    episodes = collect_episodes(
        make_vec(num_envs=2), policy, num_episodes=2, seed=0, max_prompt_tokens=10
    )
    assert policy.prompts == []
    for episode in episodes:
        (turn,) = episode.turns
        assert turn.action == ""
        assert turn.response_ids == []
        assert turn.response_logprobs == []
        assert turn.reward == 0.0
        assert turn.truncated
        assert turn.info == {"truncated_reason": "context", "generation_skipped": True}
        assert len(turn.prompt_ids) > 10


def test_the_policy_context_budget_is_the_default(make_vec, lm):
    collector = RolloutCollector(make_vec(), lm(max_prompt_tokens=123))
    assert collector.max_prompt_tokens == 123


def test_a_context_length_error_from_a_concurrent_policy_truncates_that_episode(make_vec):
    class RejectsSecondTurn(ConcurrentBinarySearch):
        def _answer(self, prompt, first):
            if len(prompt) > 1:
                raise ContextLengthError("too long")
            return super()._answer(prompt, first)

    episodes = collect_episodes(make_vec(num_envs=2), RejectsSecondTurn(), num_episodes=4, seed=0)
    for episode in episodes:
        (turn,) = episode.turns
        if not turn.terminated:  # a lucky first guess ends the episode before the rejection
            assert turn.truncated
            assert turn.info["truncated_reason"] == "context"


def test_a_failing_sub_env_truncates_its_episode_and_is_rebuilt(make_vec):
    class RaiseFirst:
        tokenizer = None
        calls = 0

        def generate(self, prompts):
            self.calls += 1
            return [Generation(text="raise" if self.calls == 1 else "0") for _ in prompts]

    vec = SyncVectorEnv([functools.partial(ToyEnv, 2)])
    try:
        failed, restored = collect_episodes(vec, RaiseFirst(), num_episodes=2, group_size=2, seed=0)
    finally:
        vec.close()
    (turn,) = failed.turns
    assert turn.truncated
    assert "RuntimeError: toy failure" in turn.info["error"]
    assert restored.turns[0].observation == failed.turns[0].observation
    assert "error" not in restored.turns[0].info
    assert restored.complete


def test_policy_errors_propagate(make_vec):
    class Broken:
        tokenizer = None

        def generate(self, prompts):
            return []

    with pytest.raises(RuntimeError, match="returned 0 generations for 2 prompts"):
        collect_episodes(make_vec(num_envs=2), Broken(), num_episodes=2)


def test_tokens_mode_needs_a_tokenizer(make_vec):
    with pytest.raises(ValueError, match="tokenizer"):
        RolloutCollector(make_vec(), BinarySearchPolicy(), prompt_mode="tokens")


def test_auto_mode_uses_messages_without_a_tokenizer(make_vec):
    assert RolloutCollector(make_vec(), BinarySearchPolicy()).prompt_mode == "messages"
