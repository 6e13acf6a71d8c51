"""A small tree collection with token ids, for the tests of what trainers receive from GiGPO
and tree advantages: 2 trees (2 roots, forks of 2, at most 6 episodes each) of the tiny LM
of tests/random_byte_lm.py on GuessTheNumber (3 turns), with rewards that differ."""

from __future__ import annotations

import functools
from typing import Any

import xpgym
from xpgym.core.env import Wrapper
from xpgym.core.trajectory import Episode
from xpgym.rollout.collector import RolloutCollector
from xpgym.rollout.tree import TreeSpec

EASY = "game:GuessTheNumber-v0-easy"
SPEC = TreeSpec(roots=2, branches=2, max_episodes=6)


class Scored(Wrapper):
    """Reward = the action's first byte / 255: returns differ between episodes."""

    def step(self, action: str) -> Any:
        obs, _, terminated, truncated, info = self.env.step(action)
        return obs, (action.encode() or b"\0")[0] / 255, terminated, truncated, info


@functools.cache
def tree_episodes() -> tuple[Episode, ...]:
    """The collection (built once per process; copy an episode before changing it)."""
    import random_byte_lm

    from xpgym.rollout.policies.hf import HFPolicy

    policy = HFPolicy(
        random_byte_lm.tiny_model(0), random_byte_lm.tiny_tokenizer(), max_new_tokens=4, seed=0
    )
    with xpgym.make_vec(EASY, 4, wrappers=[Scored]) as vec:
        collector = RolloutCollector(vec, policy, max_turns=3, record_states=True)
        return tuple(collector.collect_tree(2, SPEC, seed=0))
