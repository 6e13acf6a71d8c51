"""Oat (oat-llm 0.2.x): `xpgym.adapters.oat.to_transition_data`, one row per turn.

Only ``oat.types`` (and Oat's small torch utilities) import without Oat's GPU stack; the
learner's advantage methods (``PPOLearner.compute_monte_carlo_advantages``,
``PPOMultiTurnLearner.compute_advantages``) live in ``oat.algorithms``, which imports vLLM,
DeepSpeed and launchpad at the top. So the check runs what Oat's learner does with the rows
it receives (``rewards.sum(-1)`` per row) and xpgym's learner hook (`batch_normalize`, the
ReBN of ``XpgymLearner``) on the converted ``TransitionData``; Oat's own group estimators are
``not runnable`` here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from parity.shared.trainer_code import package_version
from parity.tokens._layout import check_same
from parity.tokens.cases import Case, policy_tokens, token_rewards
from parity.tokens.core import TOL, Estimator, LayoutCheck, TokenValues, TrainerSpec
from xpgym.core.trajectory import Episode
from xpgym.training.advantages import discounted_returns, turn_rewards

__all__ = ["SPEC"]

NO_LEARNER = (
    "Oat's learner (oat.algorithms.ppo: compute_monte_carlo_advantages) imports deepspeed, "
    "vllm and launchpad at module level"
)


@contextmanager
def _load() -> Iterator[None]:
    import xpgym.adapters.oat  # noqa: F401  (imports oat.types)

    yield


def _rows(case: Case, episodes: list[Episode]) -> list[Any]:
    from xpgym.adapters.oat import to_transition_data

    return to_transition_data(episodes, gamma=case.gamma)


def _per_episode(rows: list[Any], values: np.ndarray) -> TokenValues:
    """Row values broadcast over each row's response tokens, rows grouped by episode."""
    out: dict[int, list[np.ndarray]] = {}
    for row, value in zip(rows, values, strict=True):
        out.setdefault(row.info["episode"], []).append(np.full(len(row.response_ids), value))
    return [np.concatenate(out[e]) for e in sorted(out)]


def _row_sums(case: Case, episodes: list[Episode]) -> TokenValues:
    rows = _rows(case, episodes)
    return _per_episode(rows, np.array([sum(row.rewards) for row in rows]))


def _learner_rebn(case: Case, episodes: list[Episode]) -> TokenValues:
    import torch

    from xpgym.adapters.oat import batch_normalize

    rows = _rows(case, episodes)
    sums = torch.tensor([sum(row.rewards) for row in rows], dtype=torch.float32)
    return _per_episode(rows, batch_normalize(sums).numpy())


def _layout(case: Case, episodes: list[Episode]) -> list[LayoutCheck]:
    rows = _rows(case, episodes)
    rewards, mask = turn_rewards(episodes)
    returns = discounted_returns(rewards, mask, case.gamma)
    turns = [turn for ep in episodes for turn in ep.turns]
    by_episode: dict[int, list[Any]] = {}
    for row in rows:
        by_episode.setdefault(row.info["episode"], []).append(row)
    return [
        check_same(
            "response_ids (every one trained) are the policy tokens",
            [np.concatenate([r.response_ids for r in by_episode[e]]) for e in sorted(by_episode)],
            [policy_tokens(ep) for ep in episodes],
        ),
        check_same(
            "rewards: the turn's return G_t on its last response token",
            [np.concatenate([r.rewards for r in by_episode[e]]) for e in sorted(by_episode)],
            [token_rewards(ep, returns[e]) for e, ep in enumerate(episodes)],
            tol=TOL,
        ),
        LayoutCheck(
            "one row per turn, prompt_ids = the turn's prompt (history included)",
            len(rows) == len(turns)
            and all(r.prompt_ids == t.prompt_ids for r, t in zip(rows, turns, strict=True)),
        ),
        LayoutCheck(
            "loss_mask True and sampler log-probs on every row",
            all(
                r.loss_mask and r.response_logprobs == t.response_logprobs
                for r, t in zip(rows, turns, strict=True)
            ),
        ),
    ]


SPEC = TrainerSpec(
    name="oat",
    version=lambda: package_version("oat-llm"),
    load=_load,
    layout=_layout,
    estimators=(
        Estimator("reinforce", "row rewards.sum(-1) (what Oat's learner reads)", _row_sums),
        Estimator("rebn", "XpgymLearner ReBN (batch_normalize of the row sums)", _learner_rebn),
        Estimator("grpo", "critic_type=grpo", why_not=NO_LEARNER),
        Estimator("dr_grpo", "critic_type=drgrpo", why_not=NO_LEARNER),
        Estimator(
            "rloo", "(none)", why_not="Oat has no RLOO estimator (GEM's oat recipe adds one)"
        ),
    ),
)
