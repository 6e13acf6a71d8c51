"""What xpgym costs per turn around the model (pytest-benchmark):
``pytest tests/benchmarks/test_collector_overhead.py --benchmark-only``.

One rollout of the CPU demo's shape (64 episodes of ``game:GuessTheNumber-v0-easy`` in
flight, the demo's tokenizer and ChatML template, token-exact prompts) collected with a
policy that costs next to nothing: it answers every prompt with one of ten scripted
``\\boxed{n}`` replies (ids and text made once). What is timed is therefore everything but
generation: the vector env, prompt building, the collector's and the recorder's
bookkeeping. ``extra_info`` has the microseconds per turn; the share of a real rollout is
in ``docs/benchmarks.md`` (``scripts/bench_rollout.py``). No target is asserted here.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("transformers", reason="the demo's tokenizer needs transformers")

import xpgym
from xpgym.core.chat import Prompt
from xpgym.reference.tiny_model import build_tiny_tokenizer, env_corpus
from xpgym.reference.warm_start import CORPUS_SEED
from xpgym.rollout.collector import RolloutCollector
from xpgym.rollout.policies import Generation

ENV_ID = "game:GuessTheNumber-v0-easy"
EPISODES = 64
ROUNDS = 20


class ScriptedReplies:
    """A policy that answers each prompt with a random one of `replies` (text, ids): no
    model, so a rollout's time is xpgym's own."""

    def __init__(self, tokenizer: Any, replies: Sequence[str], seed: int = 0) -> None:
        self.tokenizer = tokenizer
        stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self._replies = [
            (text, [*tokenizer.encode(text, add_special_tokens=False), stop]) for text in replies
        ]
        self._rng = random.Random(seed)

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        out = []
        for prompt in prompts:
            text, ids = self._rng.choice(self._replies)
            out.append(
                Generation(
                    text=text,
                    token_ids=list(ids),
                    logprobs=[-0.5] * len(ids),
                    prompt_ids=list(prompt),  # type: ignore[arg-type]  # token ids here
                )
            )
        return out


def test_collector_overhead_per_turn(benchmark: Any) -> None:
    corpus = env_corpus(xpgym.make(ENV_ID), episodes=50, seed=CORPUS_SEED)  # the demo's
    tokenizer = build_tiny_tokenizer(corpus, max_number=100)
    policy = ScriptedReplies(tokenizer, [f"\\boxed{{{n}}}" for n in range(1, 11)])
    vec = xpgym.make_vec(ENV_ID, EPISODES)
    collector = RolloutCollector(vec, policy)
    assert collector.prompt_mode == "tokens"
    seeds = iter(range(10**6))
    turns: list[int] = []

    def rollout() -> None:
        episodes = collector.collect(EPISODES, seed=next(seeds))
        turns.append(sum(len(e.turns) for e in episodes))

    benchmark.pedantic(rollout, rounds=ROUNDS, warmup_rounds=2)
    vec.close()
    per_turn = benchmark.stats.stats.median / (sum(turns[2:]) / ROUNDS)
    benchmark.extra_info["turns_per_rollout"] = sum(turns[2:]) / ROUNDS
    benchmark.extra_info["us_per_turn"] = per_turn * 1e6
    assert all(t >= EPISODES for t in turns)  # every episode played at least one turn
