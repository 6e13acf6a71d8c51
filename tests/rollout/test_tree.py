"""Tree rollouts: `RolloutCollector.collect_tree` and the rules of `xpgym.rollout.tree`."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import xpgym
from xpgym.core.chat import Prompt
from xpgym.core.trajectory import Episode, Turn
from xpgym.rollout.collector import RolloutCollector
from xpgym.rollout.policies import Generation
from xpgym.rollout.tree import (
    BranchRule,
    TreeSpec,
    generated_tokens,
    generation_cost,
    turn_surprisal,
)

EASY = "game:GuessTheNumber-v0-easy"
_RANGE = re.compile(r"from (-?\d+) to (-?\d+)")


class RandomGuesses:
    """A batched chat-message policy: a random guess in the announced range from its own
    seeded RNG, with a made-up log-prob per character (for the entropy rule)."""

    tokenizer = None

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        out = []
        for messages in prompts:
            lo, hi = map(int, _RANGE.search(messages[0]["content"]).groups())
            text = f"\\boxed{{{int(self.rng.integers(lo, hi + 1))}}}"
            ids = [ord(c) for c in text]
            out.append(Generation(text, token_ids=ids, logprobs=[-self.rng.random()] * len(ids)))
        return out


@pytest.fixture
def vecs():
    made: list[Any] = []
    yield made
    for vec in made:
        vec.close()


def grow(vecs: list[Any], spec: TreeSpec, *, num_envs: int = 4, seed: int = 0, **kw: Any):
    vecs.append(xpgym.make_vec(EASY, num_envs, **kw))
    collector = RolloutCollector(
        vecs[-1], RandomGuesses(seed), max_turns=5, record_states=True, prompt_mode="messages"
    )
    return collector.collect_tree(2, spec, seed=seed)


def by_tree(episodes: list[Episode], roots: int) -> dict[str, list[Episode]]:
    trees: dict[str, list[Episode]] = {}
    root_of: dict[str, str] = {}
    for episode in episodes:
        key = str(episode.episode_id)
        root_of[key] = (
            str(episode.group_id) if episode.parent_id is None else root_of[episode.parent_id]
        )
        trees.setdefault(root_of[key], []).append(episode)
    assert all(sum(e.parent_id is None for e in tree) == roots for tree in trees.values())
    return trees


def test_no_tree_outgrows_its_episode_budget_and_trees_are_contiguous(vecs):
    episodes = grow(vecs, TreeSpec(roots=2, branches=3, max_episodes=9))
    trees = by_tree(episodes, roots=2)
    assert len(trees) == 2
    assert all(2 < len(tree) <= 9 for tree in trees.values())
    assert [e for tree in trees.values() for e in tree] == episodes  # tree by tree, roots first
    assert len({e.episode_id for e in episodes}) == len(episodes)


def test_a_spent_token_budget_stops_forking():
    spec = TreeSpec(roots=2, branches=2, max_tokens=10)
    assert spec.allows(episodes=2, tokens=9)
    assert not spec.allows(episodes=2, tokens=10)
    capped = TreeSpec(roots=2, branches=2, max_episodes=5)
    assert capped.allows(episodes=3, tokens=10**9)
    assert not capped.allows(episodes=4, tokens=0)  # 4 + 2 branches > 5


def test_trees_fork_until_their_finished_episodes_reach_the_token_budget(vecs):
    # the first episode to finish has generated > 1 token: no tree ever forks
    assert all(e.parent_id is None for e in grow(vecs, TreeSpec(max_tokens=1)))
    # One sub-env: episodes run one at a time in the order they were queued (a tree's order
    # in the output), so the tokens a tree had when an episode finished are its own and
    # those of the tree's episodes before it.
    episodes = grow(vecs, TreeSpec(branches=2, max_tokens=150), num_envs=1, seed=1)
    for tree in by_tree(episodes, roots=2).values():
        spent = np.cumsum([generated_tokens(e) for e in tree])
        parents = {e.parent_id for e in tree}
        forked = [e.episode_id in parents for e in tree]
        assert any(forked)
        assert all(spent[i] < 150 for i in range(len(tree)) if forked[i])
        assert spent[-1] >= 150  # forking stopped because the budget was spent
        assert not any(forked[i] for i in range(len(tree)) if spent[i] >= 150)


def test_every_turn_rule_forks_roots_from_turn_one_and_branches_after_their_turn():
    root = Episode("x", turns=[Turn("o", "a", 0.0)] * 4, episode_id="r")
    branch = Episode(
        "x", turns=[Turn("o", "a", 0.0)] * 4, episode_id="b", parent_id="r", parent_turn=1
    )
    assert BranchRule().choose(root) == [1, 2, 3]
    assert BranchRule().choose(branch) == [2, 3]
    assert BranchRule("turns", (0, 2, 9)).choose(root) == [2]
    assert BranchRule("turns", (1,)).choose(branch) == []
    failed = Episode("x", turns=root.turns, infra_error={"kind": "env", "message": "gone"})
    assert BranchRule().choose(failed) == []


def test_entropy_rule_picks_the_least_certain_turns_first():
    def turn(logprobs: list[float]) -> Turn:
        return Turn("o", "a", 0.0, response_ids=[1] * len(logprobs), response_logprobs=logprobs)

    turns = [turn([-9.0]), turn([-0.1, -0.1]), turn([-2.0, -1.0]), turn([-3.0]), turn([-1.5])]
    episode = Episode("x", turns=turns)
    assert turn_surprisal(turns[2]) == pytest.approx(1.5)
    assert BranchRule("entropy", top=2).choose(episode) == [3, 2]  # turn 0 is the roots'
    assert BranchRule("entropy", top=3).choose(episode) == [3, 2, 4]  # tie: earlier first
    with pytest.raises(ValueError, match="response_logprobs"):
        BranchRule("entropy").choose(
            Episode("x", turns=[Turn("o", "a", 0.0, response_ids=[1])] * 2)
        )


def test_fixed_turn_rule_branches_only_there_and_branches_carry_parent_and_turn(vecs):
    episodes = grow(
        vecs, TreeSpec(roots=2, branches=2, rule=BranchRule("turns", (2,)), max_episodes=20)
    )
    by_id = {e.episode_id: e for e in episodes}
    branches = [e for e in episodes if e.parent_id is not None]
    assert branches
    for branch in branches:
        parent = by_id[branch.parent_id]
        assert parent.parent_id is None  # a branch cannot branch at turn 2 again
        assert branch.parent_turn == 2
        assert branch.group_id == f"{parent.episode_id}@2"
        assert branch.turns[:2] == parent.turns[:2]
        assert branch.turns[2].observation == parent.turns[2].observation
        assert branch.complete
    # every root long enough to have a turn 2 was forked there
    long_roots = {e.episode_id for e in episodes if e.parent_id is None and len(e.turns) > 2}
    assert {b.parent_id for b in branches} == long_roots


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_trees_are_deterministic_by_seed_in_every_backend(vecs, mode):
    spec = TreeSpec(roots=2, branches=2, rule=BranchRule("entropy", top=2), max_episodes=10)
    in_sync = grow(vecs, spec, seed=3)
    in_mode = grow(vecs, spec, seed=3, vectorization_mode=mode)
    assert any(e.parent_id for e in in_sync)
    assert [e.to_json() for e in in_mode] == [e.to_json() for e in in_sync]
    assert [e.to_json() for e in grow(vecs, spec, seed=4)] != [e.to_json() for e in in_sync]


def test_collect_tree_refuses_a_collector_that_does_not_record_states(vecs):
    vecs.append(xpgym.make_vec(EASY, 2))
    collector = RolloutCollector(vecs[-1], RandomGuesses(0))
    with pytest.raises(ValueError, match="record_states=True"):
        collector.collect_tree(1, TreeSpec(max_episodes=4))


def test_a_tree_spec_needs_a_budget():
    with pytest.raises(ValueError, match="budget"):
        TreeSpec()
    with pytest.raises(ValueError, match="below roots"):
        TreeSpec(roots=4, max_episodes=3)


def test_generation_cost_counts_a_branchs_shared_prefix_once(vecs):
    episodes = grow(vecs, TreeSpec(roots=2, branches=2, max_episodes=8))
    cost = generation_cost(episodes)
    everything = sum(len(t.response_ids or ()) for e in episodes for t in e.turns)
    shared = sum(len(t.response_ids or ()) for e in episodes for t in e.turns[: e.parent_turn or 0])
    assert shared > 0
    assert cost.tokens == everything - shared
    assert cost.tokens_per_episode == pytest.approx(cost.tokens / len(episodes))


def test_tree_branches_share_their_prefix_tokens_and_the_kv_cache_reuses_it(vecs):
    random_byte_lm = pytest.importorskip("random_byte_lm", reason="needs torch and transformers")
    from xpgym.rollout.policies.hf import HFPolicy

    policy = HFPolicy(
        random_byte_lm.tiny_model(0), random_byte_lm.tiny_tokenizer(), max_new_tokens=6, seed=0
    )
    vecs.append(xpgym.make_vec(EASY, 8))
    collector = RolloutCollector(vecs[-1], policy, max_turns=4, record_states=True)
    episodes = collector.collect_tree(2, TreeSpec(roots=2, branches=2, max_episodes=6), seed=1)
    by_id = {e.episode_id: e for e in episodes}
    branches = [e for e in episodes if e.parent_id is not None]
    assert branches
    for branch in branches:
        parent, turn = by_id[branch.parent_id], branch.parent_turn
        for mine, theirs in zip(branch.turns[:turn], parent.turns[:turn], strict=True):
            assert mine.prompt_ids == theirs.prompt_ids
            assert mine.response_ids == theirs.response_ids
        assert branch.turns[turn].prompt_ids == parent.turns[turn].prompt_ids
    # Each branch's first prompt lies in a cached row (its parent's or a sibling's), so at
    # most its last token is prefilled: the prompts prefilled in all are the roots' and the
    # tokens each turn added, never a branch's shared prefix again.
    stats = policy.cache_stats
    continuing = [
        (e.turns[t - 1], e.turns[t])
        for e in episodes
        for t in range((e.parent_turn or 0) + 1, len(e.turns))
    ]  # a turn after one of its own: the template tokens between, + 1 unfed token at most
    added = sum(
        len(t.prompt_ids) - len(p.prompt_ids) - len(p.response_ids) + 1 for p, t in continuing
    )
    roots = sum(len(e.turns[0].prompt_ids) for e in episodes if e.parent_id is None)
    assert stats.full_prefills == 1
    assert stats.prefilled <= roots + added + len(branches)
