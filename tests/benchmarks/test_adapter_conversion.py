"""What converting episodes into each trainer's batch costs (pytest-benchmark):
``pytest tests/benchmarks --benchmark-only -k adapter_conversion``.

One batch of 256 episodes x 5 turns (a 64-token first prompt, 40 env tokens between turns,
100 policy tokens a turn: 128,000 policy tokens, rows of ~800 tokens) is converted by each
adapter's own function, the one its rollout hook calls. ``extra_info`` records the policy
tokens converted per second; the goal for per-episode rows is >= 5M tokens/s on one core
(`docs/benchmarks.md` has the measured table). No budget is asserted. An adapter whose
trainer does not import here is skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from xpgym.core.trajectory import Episode, Turn

EPISODES, TURNS, FIRST_PROMPT, ENV_TOKENS, POLICY_TOKENS = 256, 5, 64, 40, 100
PAD = 0


def _episodes() -> list[Episode]:
    """Prefix-consistent episodes: each prompt extends the last prompt and response."""
    rng = np.random.default_rng(0)
    out = []
    for index in range(EPISODES):
        prompt = rng.integers(1, 30_000, FIRST_PROMPT).tolist()
        turns = []
        for turn in range(TURNS):
            response = rng.integers(1, 30_000, POLICY_TOKENS).tolist()
            turns.append(
                Turn(
                    observation="obs",
                    action="act",
                    reward=float(turn == TURNS - 1),
                    prompt_ids=prompt,
                    response_ids=response,
                    response_logprobs=[-0.5] * POLICY_TOKENS,
                    terminated=turn == TURNS - 1,
                )
            )
            prompt = prompt + response + rng.integers(1, 30_000, ENV_TOKENS).tolist()
        out.append(Episode("bench", seed=index, group_id=f"g{index // 8}", turns=turns))
    return out


def _verl(episodes: list[Episode]) -> Any:
    from xpgym.adapters.verl import to_data_proto

    return to_data_proto(episodes, pad_token_id=PAD, layout="per_episode")


def _openrlhf(episodes: list[Episode]) -> Any:
    from xpgym.adapters.openrlhf import to_experience

    return to_experience(episodes, pad_token_id=PAD)


def _rl2(episodes: list[Episode]) -> Any:
    from xpgym.adapters.rl2 import to_tensor_dict

    return to_tensor_dict(episodes)


def _roll(episodes: list[Episode]) -> Any:
    from xpgym.adapters.roll import trajectory_batch

    return trajectory_batch(episodes, pad_token_id=PAD, sequence_length=1024)


def _trl(episodes: list[Episode]) -> Any:
    from xpgym.adapters.trl import to_rollout_output

    return to_rollout_output(episodes)


def _oat(episodes: list[Episode]) -> Any:  # per-turn rows: Oat learns on transitions
    from xpgym.adapters.oat import to_transition_data

    return to_transition_data(episodes, gamma=1.0, ignore_no_eos=True)


def _core_rows(episodes: list[Episode]) -> Any:  # the shared layout every adapter builds on
    from xpgym.training.layouts import episode_rows

    return episode_rows(episodes)


CONVERTERS: dict[str, Callable[[list[Episode]], Any]] = {
    "core episode_rows": _core_rows,
    "verl to_data_proto": _verl,
    "openrlhf to_experience": _openrlhf,
    "rl2 to_tensor_dict": _rl2,
    "roll trajectory_batch": _roll,
    "trl to_rollout_output": _trl,
    "oat to_transition_data (per turn)": _oat,
}


@pytest.mark.parametrize("name", list(CONVERTERS))
def test_adapter_conversion(benchmark: Any, name: str) -> None:
    episodes = _episodes()
    convert = CONVERTERS[name]
    try:
        convert(episodes[:2])
    except ImportError as err:
        pytest.skip(f"{name}: its trainer does not import here ({err})")
    benchmark.pedantic(convert, args=(episodes,), rounds=15, warmup_rounds=2)  # a steady median
    tokens = EPISODES * TURNS * POLICY_TOKENS
    benchmark.extra_info["policy_tokens_per_s"] = round(tokens / benchmark.stats.stats.median)
