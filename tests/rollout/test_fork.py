"""Forking episodes: `RolloutCollector(record_states=True).fork` and `Env.can_fork`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import xpgym
from xpgym.core.chat import Prompt
from xpgym.core.env import Env, Wrapper
from xpgym.core.tools.base import Tool, ToolCall, ToolResult
from xpgym.core.trajectory import Episode
from xpgym.core.vector import SyncVectorEnv
from xpgym.core.wrappers.tools import ToolEnvWrapper
from xpgym.remote.client import RemoteEnv
from xpgym.rollout.collector import RolloutCollector
from xpgym.rollout.policies import Generation

EASY = "game:GuessTheNumber-v0-easy"
_RANGE = re.compile(r"from (-?\d+) to (-?\d+)")


class RandomGuesses:
    """A batched policy over chat messages: a random guess in the announced range, from its
    own seeded RNG (so its answers depend on the order of its calls, as a sampler's do)."""

    tokenizer = None

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        out = []
        for messages in prompts:
            lo, hi = map(int, _RANGE.search(messages[0]["content"]).groups())
            out.append(Generation(text=f"\\boxed{{{int(self.rng.integers(lo, hi + 1))}}}"))
        return out


class HistoryGuesses:
    """Guesses ``lo + (assistant messages so far)``: its answer depends on the whole
    conversation it is given."""

    tokenizer = None

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        out = []
        for messages in prompts:
            lo = int(_RANGE.search(messages[0]["content"]).group(1))
            said = sum(m["role"] == "assistant" for m in messages)
            out.append(Generation(text=f"\\boxed{{{lo + said}}}"))
        return out


class Replay:
    """Answers each prompt with the generation an episode recorded for it (token ids,
    log-probs, text, finish reason): replays the episode's actions."""

    def __init__(self, tokenizer: Any, episode: Episode) -> None:
        self.tokenizer = tokenizer
        self.answers = {
            tuple(turn.prompt_ids): Generation(
                text=turn.action,
                finish_reason="length" if turn.info.get("generation_truncated") else "stop",
                token_ids=turn.response_ids,
                logprobs=turn.response_logprobs,
            )
            for turn in episode.turns
        }

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        return [self.answers[tuple(p)] for p in prompts]


class Unforkable(Wrapper[str]):
    """An env whose state (it pretends) lives outside the process."""

    def can_fork(self) -> bool:
        return False


class InProcessTool(Tool):
    name = "inside"

    def instructions(self) -> str:
        return ""

    def function_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "parameters": {}}}

    def parse(self, action: str) -> ToolCall | None:
        return None

    def execute(self, call: ToolCall) -> ToolResult:
        return ToolResult("")


class OutsideStateTool(InProcessTool):
    name = "outside"
    forkable = False


def without_fork_fields(episode: Episode) -> dict[str, Any]:
    data = episode.to_dict()
    for name in ("episode_id", "parent_id", "parent_turn", "group_id"):
        data.pop(name, None)
    return data


@pytest.fixture
def vecs():
    made: list[Any] = []
    yield made
    for vec in made:
        vec.close()


def test_a_branch_replaying_the_parents_actions_reproduces_its_tokens(vecs):
    random_byte_lm = pytest.importorskip("random_byte_lm", reason="needs torch and transformers")
    from xpgym.rollout.policies.hf import HFPolicy

    policy = HFPolicy(
        random_byte_lm.tiny_model(0), random_byte_lm.tiny_tokenizer(), max_new_tokens=6, seed=0
    )
    vecs.append(xpgym.make_vec(EASY, 2))
    collector = RolloutCollector(vecs[-1], policy, max_turns=4, record_states=True)
    assert collector.prompt_mode == "tokens"
    parent = collector.collect(2, seed=3)[0]
    assert len(parent.turns) == 4
    collector.policy = Replay(policy.tokenizer, parent)
    for turn in range(4):
        branches = collector.fork(parent, turn, 2)
        for branch in branches:
            assert (branch.parent_id, branch.parent_turn) == (parent.episode_id, turn)
            assert without_fork_fields(branch) == without_fork_fields(parent)


def test_a_branch_in_messages_mode_gets_the_parents_conversation(vecs):
    vecs.append(xpgym.make_vec(EASY, 2))
    collector = RolloutCollector(vecs[-1], HistoryGuesses(), record_states=True)
    assert collector.prompt_mode == "messages"
    parent = collector.collect(1, seed=0)[0]
    assert len(parent.turns) >= 3
    for turn in (1, len(parent.turns) - 1):
        (branch,) = collector.fork(parent, turn, 1)
        assert without_fork_fields(branch) == without_fork_fields(parent)


def forked_with_random_guesses(vec: Any) -> list[Episode]:
    """Three branches from the middle of the longest of 4 seeded episodes (groups of 2)."""
    collector = RolloutCollector(vec, RandomGuesses(7), record_states=True)
    parent = max(collector.collect(4, group_size=2, seed=5), key=lambda e: len(e.turns))
    return collector.fork(parent, len(parent.turns) // 2, 3)


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_branches_are_deterministic_by_seed_in_every_backend(vecs, mode):
    vecs.append(xpgym.make_vec(EASY, 2))
    vecs.append(xpgym.make_vec(EASY, 2, vectorization_mode=mode))
    in_sync, in_mode = (forked_with_random_guesses(vec) for vec in vecs)
    assert len({tuple(t.action for t in e.turns) for e in in_sync}) > 1  # they do differ
    assert [e.to_json() for e in in_mode] == [e.to_json() for e in in_sync]


def test_branches_share_the_prefix_and_continue_their_own_way(vecs):
    vecs.append(xpgym.make_vec(EASY, 3))
    collector = RolloutCollector(vecs[-1], RandomGuesses(1), record_states=True)
    parent = max(collector.collect(3, seed=0), key=lambda e: len(e.turns))
    assert len(parent.turns) >= 3
    branches = collector.fork(parent, 2, 4)
    assert [b.episode_id for b in branches] == [f"{parent.episode_id}@2/{b}" for b in range(4)]
    assert {b.group_id for b in branches} == {f"{parent.episode_id}@2"}
    for branch in branches:
        assert branch.turns[:2] == parent.turns[:2]
        assert branch.turns[2].observation == parent.turns[2].observation
        assert branch.complete
        assert branch.seed == parent.seed
    assert len({tuple(t.action for t in b.turns[2:]) for b in branches}) > 1


def test_a_branch_can_be_forked_again(vecs):
    vecs.append(xpgym.make_vec(EASY, 2))
    collector = RolloutCollector(vecs[-1], RandomGuesses(2), record_states=True)
    parent = max(collector.collect(2, seed=1), key=lambda e: len(e.turns))
    branch = max(collector.fork(parent, 1, 2), key=lambda e: len(e.turns))
    assert len(branch.turns) >= 3
    (grandchild,) = collector.fork(branch, 0, 1)
    assert grandchild.parent_id == branch.episode_id
    assert grandchild.turns[0].observation == parent.turns[0].observation


def test_without_record_states_nothing_is_kept_and_episodes_have_no_ids(vecs):
    vecs.append(xpgym.make_vec(EASY, 2))
    collector = RolloutCollector(vecs[-1], RandomGuesses(0))
    episode = collector.collect(2, seed=0)[0]
    assert episode.episode_id is None
    assert "episode_id" not in episode.to_dict()
    with pytest.raises(ValueError, match="record_states=True"):
        collector.fork(episode, 0, 2)


def test_forking_an_env_that_cannot_fork_names_the_env():
    vec = SyncVectorEnv([lambda: Unforkable(xpgym.make(EASY))])
    try:
        collector = RolloutCollector(vec, RandomGuesses(0), record_states=True)
        (episode,) = collector.collect(1, seed=0)
        with pytest.raises(ValueError, match=re.escape(f"its env {EASY!r} cannot fork")):
            collector.fork(episode, 0, 2)
    finally:
        vec.close()


class Stateless(Unforkable):
    """An env without snapshots at all."""

    def get_state(self) -> dict[str, Any]:
        raise NotImplementedError("no snapshots here")


def test_recording_skips_envs_that_cannot_fork_and_collects_as_before():
    vec = SyncVectorEnv([lambda: Stateless(xpgym.make(EASY))])
    try:
        recording = RolloutCollector(vec, RandomGuesses(3), record_states=True)
        plain = RolloutCollector(vec, RandomGuesses(3))
        assert recording.collect(1, seed=4)[0].to_json() == plain.collect(1, seed=4)[0].to_json()
    finally:
        vec.close()


def test_fork_refuses_a_turn_out_of_range(vecs):
    vecs.append(xpgym.make_vec(EASY, 1))
    collector = RolloutCollector(vecs[-1], RandomGuesses(0), record_states=True)
    (episode,) = collector.collect(1, seed=0)
    with pytest.raises(ValueError, match="turn must be an int in"):
        collector.fork(episode, len(episode.turns), 2)
    with pytest.raises(ValueError, match="k must be a positive int"):
        collector.fork(episode, 0, 0)


def test_can_fork_defaults_to_having_get_state_and_wrappers_ask_the_inner_env():
    env = xpgym.make(EASY)
    assert env.can_fork()
    assert not Unforkable(env).can_fork()

    class NoState(Env[str]):
        pass

    assert not NoState().can_fork()


def test_a_tool_with_outside_state_makes_the_env_unforkable():
    env = xpgym.make(EASY)
    assert ToolEnvWrapper(env, [InProcessTool()]).can_fork()
    assert not ToolEnvWrapper(env, [InProcessTool(), OutsideStateTool()]).can_fork()


def test_a_tool_with_a_leased_resource_makes_the_env_unforkable():
    from xpgym.core.resources import ResourcePool
    from xpgym.core.tools import tool

    pool = ResourcePool(dict, 1)

    @tool(resource=pool)
    def remember(key: str, resource: dict) -> str:
        """Keep a key in this episode's scratch store."""
        resource[key] = True
        return key

    @tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    assert ToolEnvWrapper(xpgym.make(EASY), [echo]).can_fork()
    assert not ToolEnvWrapper(xpgym.make(EASY), [echo, remember]).can_fork()
    pool.close()


def test_a_remote_env_says_it_cannot_fork():
    assert not RemoteEnv.can_fork(object.__new__(RemoteEnv))


def test_forked_branches_lay_out_as_a_tree_for_tree_advantages(vecs):
    from xpgym.core.trajectory import tree_nodes
    from xpgym.training.advantages import episode_scores, tree_advantages, turn_rewards

    vecs.append(xpgym.make_vec(EASY, 2))
    collector = RolloutCollector(vecs[-1], RandomGuesses(4), record_states=True)
    parent = max(collector.collect(2, seed=2), key=lambda e: len(e.turns))
    episodes = [parent, *collector.fork(parent, 1, 3)]
    roots, nodes = tree_nodes(episodes)
    assert roots == [parent.group_id] * 4
    rewards, mask = turn_rewards(episodes)
    scores = episode_scores(rewards, mask)
    out = tree_advantages(scores, mask, roots, nodes)
    np.testing.assert_allclose(out.sum(axis=1), scores - scores.mean(), atol=1e-12)
    np.testing.assert_array_equal(out[:, 0], 0.0)  # every episode shares turn 0
