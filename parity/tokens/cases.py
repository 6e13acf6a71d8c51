"""The parity cases: golden episode batches, the gamma each is checked with, and what the
episodes themselves say every trainer must see.

Each case is one file ``parity/tokens/golden/<name>.jsonl`` (`xpgym.core.trajectory.save_episodes`,
one `Episode` JSON per line) written by ``python -m parity.tokens.make_golden``. Token ids are
synthetic and come from three disjoint ranges, so a token in the wrong place is visible in a
diff:

=========  ==========  ===================================================================
ids        kind        trained?
=========  ==========  ===================================================================
0          padding     never (every adapter pads with 0 here)
1 - 99     first       never: the first prompt (system/user text)
           prompt
100 - 499  policy      always: some turn's ``response_ids``
500 - 999  env / tool  never: what a later turn's prompt adds after the previous response
                       (end of turn, tool output, next observation, generation prompt)
=========  ==========  ===================================================================

Rewards are multiples of 1/8, exact in float32 (trainers hold rewards in float32), so every
difference the check reports comes from the math, not from rounding the inputs. Episodes of
a group are consecutive (OpenRLHF and RL2 form groups as consecutive blocks).

The expectations here are computed from the `Turn`\\ s directly (never through
`xpgym.training.layouts`), so they check the adapters' layouts independently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xpgym.core.trajectory import Episode, load_episodes

__all__ = [
    "CASES",
    "ENV_IDS",
    "GOLDEN_DIR",
    "POLICY_IDS",
    "PROMPT_IDS",
    "Case",
    "case_by_name",
    "group_sizes",
    "per_token",
    "policy_positions",
    "policy_tokens",
    "token_rewards",
]

GOLDEN_DIR = Path(__file__).with_name("golden")
PROMPT_IDS = range(1, 100)
POLICY_IDS = range(100, 500)
ENV_IDS = range(500, 1000)


@dataclass(frozen=True)
class Case:
    """One golden batch and how it is checked.

    Attributes:
        name: File stem in `GOLDEN_DIR`.
        gamma: Discount per turn used for every estimator that takes one.
        covers: What the batch exercises (shown in docs/parity.md).
    """

    name: str
    gamma: float
    covers: str

    @property
    def path(self) -> Path:
        return GOLDEN_DIR / f"{self.name}.jsonl"

    def episodes(self) -> list[Episode]:
        """The golden episodes (fresh objects)."""
        return load_episodes(self.path)


CASES: tuple[Case, ...] = (
    Case("dense_multi_turn", 1.0, "2-3 turns, a non-zero reward on every turn, 2 groups of 2"),
    Case("discounted", 0.9, "multi-turn dense rewards with gamma 0.9 (per-turn discount)"),
    Case(
        "truncated_vs_terminated",
        0.9,
        "pairs of identical episodes, one terminated and one truncated (no trainer "
        "bootstraps a REINFORCE return, so both get the same advantages)",
    ),
    Case(
        "tool_turns", 1.0, "long tool outputs (env tokens) between turns that must not be trained"
    ),
    Case("grpo_groups", 1.0, "3 groups of 4 episodes, single- and multi-turn mixed"),
    Case("ragged", 0.9, "1 to 5 turns, responses of 1 to 9 tokens, prompts of 2 to 8 tokens"),
    Case("single_episode_group", 1.0, "groups of 2, 2 and 1 episodes (a lone episode)"),
    Case("all_equal_rewards", 1.0, "every turn return equal: zero std in every statistic"),
)


def case_by_name(name: str) -> Case:
    """The case called `name` (ValueError naming the known ones otherwise)."""
    for case in CASES:
        if case.name == name:
            return case
    raise ValueError(f"unknown case {name!r}; known: {[c.name for c in CASES]}")


def policy_tokens(episode: Episode) -> np.ndarray:
    """The ids the policy wrote in `episode`, in order: every turn's ``response_ids``."""
    return np.array([i for turn in episode.turns for i in turn.response_ids or []], dtype=np.int64)


def policy_positions(episode: Episode) -> np.ndarray:
    """Positions of the policy tokens in the episode's concatenated sequence (the last
    turn's ``prompt_ids + response_ids``): turn ``t`` occupies
    ``len(prompt_t) .. len(prompt_t) + len(response_t) - 1``."""
    spans = [
        np.arange(len(turn.prompt_ids or []), len(turn.prompt_ids or []) + len(turn.response_ids))
        for turn in episode.turns
    ]
    return np.concatenate(spans).astype(np.int64)


def per_token(episode: Episode, per_turn: np.ndarray) -> np.ndarray:
    """``per_turn[t]`` repeated over turn ``t``'s policy tokens (aligned with
    `policy_tokens`)."""
    counts = [len(turn.response_ids or []) for turn in episode.turns]
    return np.repeat(np.asarray(per_turn, dtype=np.float64)[: len(counts)], counts)


def token_rewards(episode: Episode, per_turn: np.ndarray | None = None) -> np.ndarray:
    """Per policy token: turn ``t``'s value on its last token, 0 elsewhere (aligned with
    `policy_tokens`). The value is the turn's reward unless `per_turn` is given."""
    values = [t.reward for t in episode.turns] if per_turn is None else list(per_turn)
    out = []
    for turn, value in zip(episode.turns, values, strict=False):
        row = np.zeros(len(turn.response_ids or []))
        row[-1] = value
        out.append(row)
    return np.concatenate(out)


def group_sizes(episodes: list[Episode]) -> list[int]:
    """Sizes of the consecutive blocks of equal ``group_id``."""
    sizes: list[int] = []
    previous = object()
    for episode in episodes:
        if episode.group_id == previous:
            sizes[-1] += 1
        else:
            sizes.append(1)
        previous = episode.group_id
    return sizes
