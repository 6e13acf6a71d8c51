"""Small hand-built episodes for the adapter tests, with their expected layouts written out.

Token ids are small integers chosen so every row can be checked by eye. Prompts are built by
appending (the token-exactness contract of `xpgym.core.trajectory`): the ids a turn's prompt
adds after the previous prompt and response are env/tool tokens, never trained.

=========  =====  =======================================  ================  ===========
episode    group  row of `episode_rows` (prompt | rest)    policy tokens     rewards
=========  =====  =======================================  ================  ===========
A          g0     1 2 3 | 10 11 [4 5] 12 13 14             10 11 / 12 13 14  0.0, 1.0
B          g0     1 2 3 | 20 [6] 21 22 [7 8 9] 23          20 / 21 22 / 23   0.5, 0, -0.5
C          g1     5 6 | 30 31 32 33                        30 31 32 33       2.0
D          g1     5 6 | 40                                 40                0.0
=========  =====  =======================================  ================  ===========

(``[..]``: env/tool tokens.) A ends terminated, B truncated (turn limit), C and D terminated.
`with_failed_member` adds E, an infra-error member of g0. `with_reward_metrics` records
A, B, C, D again through a reward function that reports a metric (`REWARD_METRICS`).
Every turn carries sampler log-probs ``-(token id) / 100``.
"""

from __future__ import annotations

import numpy as np
from toy_envs import rewarded_toy_env

from xpgym.core.errors import InfraCause
from xpgym.core.trajectory import Episode, Turn
from xpgym.rollout.policies import Generation
from xpgym.rollout.recorder import EpisodeRecorder

GAMMA = 0.9
PAD = 0


def _turn(prompt: list[int], response: list[int], reward: float, **flags: bool) -> Turn:
    return Turn(
        observation="obs",
        action="act",
        reward=reward,
        prompt_ids=prompt,
        response_ids=response,
        response_logprobs=[-t / 100 for t in response],
        **flags,
    )


def episodes() -> list[Episode]:
    """Episodes A, B, C, D of the module docstring (fresh objects)."""
    a = Episode(
        "toy",
        seed=1,
        group_id="g0",
        turns=[
            _turn([1, 2, 3], [10, 11], 0.0),
            _turn([1, 2, 3, 10, 11, 4, 5], [12, 13, 14], 1.0, terminated=True),
        ],
    )
    b = Episode(
        "toy",
        seed=1,
        group_id="g0",
        turns=[
            _turn([1, 2, 3], [20], 0.5),
            _turn([1, 2, 3, 20, 6], [21, 22], 0.0),
            _turn([1, 2, 3, 20, 6, 21, 22, 7, 8, 9], [23], -0.5, truncated=True),
        ],
    )
    c = Episode(
        "toy", seed=2, group_id="g1", turns=[_turn([5, 6], [30, 31, 32, 33], 2.0, terminated=True)]
    )
    d = Episode("toy", seed=2, group_id="g1", turns=[_turn([5, 6], [40], 0.0, terminated=True)])
    return [a, b, c, d]


def with_failed_member() -> list[Episode]:
    """A, B, C, D and E: a third member of group g0 whose episode ended on an infrastructure
    failure (a grader timeout). Its reward, 5.0, would move g0's statistics if it counted.

    E's row: ``1 2 3 | 50 51``; reward 5.0, terminated."""
    failed = Episode(
        "toy",
        seed=1,
        group_id="g0",
        turns=[_turn([1, 2, 3], [50, 51], 5.0, terminated=True)],
        infra_error=InfraCause("grader_timeout", "grading took over 5 s"),
    )
    return [*episodes(), failed]


def with_reward_metrics() -> list[Episode]:
    """A, B, C, D with their tokens, played on `toy_envs.rewarded_toy_env` (a reward
    function with metric ``chars``, the action's length) and recorded by the episode
    recorder: episode ``i`` writes ``"x" * (i + 1)`` every turn, so its
    ``info["metrics"]`` is ``{"action_chars": 0.0, "action_chars/chars": i + 1}``. Rewards
    and flags are the toy env's, not the table's."""
    out = []
    for i, case in enumerate(episodes()):
        env = rewarded_toy_env(episode_length=len(case.turns))
        observation, info = env.reset(seed=case.seed)
        recorder = EpisodeRecorder(
            env_id=case.env_id, seed=case.seed, group_id=case.group_id, reset_info=info
        )
        for turn in case.turns:
            action = "x" * (i + 1)
            generation = Generation(
                action, token_ids=turn.response_ids, logprobs=turn.response_logprobs
            )
            step = env.step(action)
            recorder.record(observation, generation, *step[1:], prompt_ids=turn.prompt_ids)
            observation = step[0]
        out.append(recorder.episode)
    return out


REWARD_METRICS = {"metrics/action_chars": 0.0, "metrics/action_chars/chars": 2.5}
"""`xpgym.core.trajectory.episode_metrics` of `with_reward_metrics`."""

# Per-turn rewards and returns with GAMMA = 0.9, by hand:
#   A: G = [0 + 0.9 * 1.0, 1.0]                           = [0.9, 1.0]
#   B: G2 = -0.5, G1 = 0 + 0.9 * -0.5 = -0.45, G0 = 0.5 + 0.9 * -0.45 = 0.095
#   C: [2.0]; D: [0.0]
TURN_REWARDS = [[0.0, 1.0], [0.5, 0.0, -0.5], [2.0], [0.0]]
TURN_RETURNS = [[0.9, 1.0], [0.095, -0.45, -0.5], [2.0], [0.0]]
TURN_TOKENS = [[2, 3], [1, 2, 1], [4], [1]]  # policy tokens per turn
SCORES = [1.0, 0.0, 2.0, 0.0]  # undiscounted episode totals
GROUPS = ["g0", "g0", "g1", "g1"]

# Episode rows: everything after the first prompt, with its masks.
RESPONSES = [
    [10, 11, 4, 5, 12, 13, 14],
    [20, 6, 21, 22, 7, 8, 9, 23],
    [30, 31, 32, 33],
    [40],
]
RESPONSE_MASKS = [
    [1, 1, 0, 0, 1, 1, 1],
    [1, 0, 1, 1, 0, 0, 0, 1],
    [1, 1, 1, 1],
    [1],
]
PROMPTS = [[1, 2, 3], [1, 2, 3], [5, 6], [5, 6]]
# Each turn's reward on its last policy token (index into the response).
REWARD_POSITIONS = [[1, 6], [0, 3, 7], [3], [0]]


def rebn_reference() -> list[list[float]]:
    """ReBN of TURN_RETURNS computed directly: population std over all 7 turns, eps 1e-9."""
    flat = np.array([g for ep in TURN_RETURNS for g in ep])
    normed = (flat - flat.mean()) / (flat.std() + 1e-9)
    out, k = [], 0
    for ep in TURN_RETURNS:
        out.append(list(normed[k : k + len(ep)]))
        k += len(ep)
    return out


def per_token(values_per_turn: list[list[float]]) -> list[list[float]]:
    """Per-turn values copied onto each episode row's policy tokens (0 elsewhere)."""
    out = []
    for values, mask in zip(values_per_turn, RESPONSE_MASKS, strict=True):
        row, turn, previous = [], -1, 0
        for m in mask:
            if m and not previous:
                turn += 1
            row.append(values[turn] if m else 0.0)
            previous = m
        out.append(row)
    return out
