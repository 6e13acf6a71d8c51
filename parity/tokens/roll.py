"""ROLL (alibaba/ROLL 0.3.x, git only): `xpgym.adapters.roll.step_batch` /
`trajectory_batch` layouts.

ROLL is not on PyPI (the ``roll`` name there is another project) and its own requirements
(vLLM, Megatron-core, TransferQueue, flash-attn) do not install on a CPU machine, so ROLL's
advantage code (``roll.pipeline.agentic.utils``: ``compute_discounted_returns``,
``agentic_reward_norm``) cannot run here: every estimator is ``not runnable``. The layout
checks run on the adapter's keys (GEM 0.0.4, which ROLL pins, provides the env side).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from parity.shared.trainer_code import package_version
from parity.tokens._layout import check_padding, check_same
from parity.tokens.cases import Case, policy_tokens
from parity.tokens.core import ALGORITHMS, TOL, Estimator, LayoutCheck, TrainerSpec, read_masked
from xpgym.core.trajectory import Episode

__all__ = ["SPEC"]

NOT_INSTALLABLE = (
    "ROLL is not on PyPI and its requirements (vLLM, Megatron-core, flash-attn) do not "
    "install on CPU; roll.pipeline.agentic.utils cannot be imported"
)
CODE = {
    "reinforce": "step_reinforce, reward_normalization identity",
    "rebn": "step_reinforce, reward_normalization batch mean_std",
    "grpo": "reinforce, reward_normalization traj_group_id mean_std",
    "dr_grpo": "reinforce, reward_normalization traj_group_id mean",
    "rloo": "(none)",
}


@contextmanager
def _load() -> Iterator[None]:
    import xpgym.adapters.roll  # noqa: F401  (imports gem)

    yield


def _sequence_length(episodes: list[Episode]) -> int:
    return 2 + max(len(ep.turns[-1].prompt_ids) + len(ep.turns[-1].response_ids) for ep in episodes)


def _layout(case: Case, episodes: list[Episode]) -> list[LayoutCheck]:
    from xpgym.adapters.roll import step_batch, trajectory_batch

    length = _sequence_length(episodes)
    what = {"step": "the turn's reward", "trajectory": "the episode total"}
    checks = []
    for name, build, rows in (
        ("step", step_batch, [len(ep.turns) for ep in episodes]),
        ("trajectory", trajectory_batch, [1] * len(episodes)),
    ):
        batch = build(episodes, pad_token_id=0, sequence_length=length)
        keys: dict[str, Any] = batch.batch
        mask = keys["response_mask"]
        last_real = keys["attention_mask"].sum(1) - 1
        scores_at_last = keys["scores"][np.arange(len(mask)), last_real]
        if name == "step":
            expected_scores = np.array([t.reward for ep in episodes for t in ep.turns])
        else:
            expected_scores = np.array([ep.total_reward for ep in episodes])
        checks += [
            check_same(
                f"{name}: input_ids[response_mask] are the policy tokens",
                read_masked(keys["input_ids"], mask, rows),
                [policy_tokens(ep) for ep in episodes],
            ),
            check_same(
                f"{name}: scores on the last real token ({what[name]})",
                [scores_at_last],
                [expected_scores],
                tol=TOL,
            ),
            LayoutCheck(
                f"{name}: scores are 0 elsewhere",
                float(np.abs(keys["scores"]).sum()) == float(np.abs(scores_at_last).sum()),
            ),
            LayoutCheck(
                f"{name}: position_ids 0 .. n-1, 0 at padding",
                bool(
                    (
                        keys["position_ids"]
                        == np.where(keys["attention_mask"] == 1, np.arange(length), 0)
                    ).all()
                ),
            ),
            check_padding(f"{name}: input_ids", keys["attention_mask"], side="right")[0],
            LayoutCheck(
                f"{name}: padded to sequence_length",
                keys["input_ids"].shape[1] == length,
            ),
        ]
    return checks


SPEC = TrainerSpec(
    name="roll",
    version=lambda: f"not installed (gem-llm {package_version('gem-llm')})",
    load=_load,
    layout=_layout,
    estimators=tuple(
        Estimator(
            a, CODE[a], why_not=NOT_INSTALLABLE if a != "rloo" else "ROLL has no RLOO estimator"
        )
        for a in ALGORITHMS
    ),
)
