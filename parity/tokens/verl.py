"""verl 0.9.x: `xpgym.adapters.verl.to_data_proto`, then verl's own ``compute_advantage``.

Every estimator runs through verl's dispatcher (``verl.trainer.ppo.ray_trainer.
compute_advantage``) after the V1 trainer's copy of ``rm_scores`` into
``token_level_rewards``; the advantages are read at ``response_mask``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from parity.shared.trainer_code import package_version
from parity.tokens._formulas import KEEP_TEXT, keep_single_members, token_discounted_whitened
from parity.tokens._layout import check_padding, check_same
from parity.tokens.cases import Case, policy_tokens, token_rewards
from parity.tokens.core import (
    TOL,
    Estimator,
    Formula,
    LayoutCheck,
    TokenValues,
    TrainerSpec,
    read_masked,
)
from xpgym.core.trajectory import Episode
from xpgym.training.advantages import discounted_returns, turn_rewards

__all__ = ["SPEC"]

VERL_EPS = 1e-6


@contextmanager
def _load() -> Iterator[None]:
    import xpgym.adapters.verl  # noqa: F401  (imports verl; registers the xpgym estimators)

    yield


def _data(case: Case, episodes: list[Episode], layout: str = "per_episode") -> Any:
    from xpgym.adapters.verl import to_data_proto

    return to_data_proto(episodes, pad_token_id=0, layout=layout, gamma=case.gamma)


def _rows_per_episode(episodes: list[Episode], layout: str) -> list[int]:
    return [len(ep.turns) if layout == "per_turn" else 1 for ep in episodes]


def _run(estimator: str, layout: str = "per_episode", **kwargs: Any) -> Any:
    def run(case: Case, episodes: list[Episode]) -> TokenValues:
        from verl.trainer.config import AlgoConfig
        from verl.trainer.ppo.ray_trainer import compute_advantage

        data = _data(case, episodes, layout)
        data.batch["token_level_rewards"] = data.batch["rm_scores"]
        out = compute_advantage(
            data,
            adv_estimator=estimator,
            gamma=case.gamma,
            config=AlgoConfig(gamma=case.gamma),
            **kwargs,
        )
        return read_masked(
            out.batch["advantages"].numpy(),
            out.batch["response_mask"].numpy(),
            _rows_per_episode(episodes, layout),
        )

    return run


def _layout(case: Case, episodes: list[Episode]) -> list[LayoutCheck]:
    checks = []
    rewards, mask = turn_rewards(episodes)
    returns = discounted_returns(rewards, mask, case.gamma)
    for layout in ("per_episode", "per_turn"):
        data = _data(case, episodes, layout)
        batch = {k: v.numpy() for k, v in data.batch.items()}
        rows = _rows_per_episode(episodes, layout)
        response_mask = batch["response_mask"]
        checks.append(
            check_same(
                f"{layout}: responses[response_mask] are the policy tokens",
                read_masked(batch["responses"], response_mask, rows),
                [policy_tokens(ep) for ep in episodes],
            )
        )
        if layout == "per_episode":
            expected = [token_rewards(ep) for ep in episodes]
            what = "each turn's reward on its last policy token"
        else:
            expected = [token_rewards(ep, returns[e]) for e, ep in enumerate(episodes)]
            what = "each turn's return G_t on its last policy token"
        checks.append(
            check_same(
                f"{layout}: rm_scores: {what}",
                read_masked(batch["rm_scores"], response_mask, rows),
                expected,
                tol=TOL,
            )
        )
        checks.append(
            LayoutCheck(
                f"{layout}: rm_scores and rollout_log_probs are 0 off response_mask",
                not (batch["rm_scores"][response_mask == 0].any())
                and not batch["rollout_log_probs"][response_mask == 0].any(),
            )
        )
        checks.append(
            check_same(
                f"{layout}: rollout_log_probs are the sampler's on policy tokens",
                read_masked(batch["rollout_log_probs"], response_mask, rows),
                [
                    np.array([lp for t in ep.turns for lp in t.response_logprobs or []])
                    for ep in episodes
                ],
                tol=TOL,
            )
        )
        prompt_len = batch["prompts"].shape[1]
        checks.extend(
            check_padding(
                f"{layout}: prompts",
                batch["attention_mask"][:, :prompt_len],
                side="left",
            )
        )
        checks.extend(
            check_padding(
                f"{layout}: responses",
                batch["attention_mask"][:, prompt_len:],
                side="right",
            )
        )
    return checks


def _rpp_formula(case: Case, episodes: list[Episode]) -> TokenValues:
    return token_discounted_whitened(
        [token_rewards(ep) for ep in episodes],
        case.gamma,
        std="unbiased",
        eps=1e-8,
        eps_placement="var",
    )


def _group_keep(algorithm: str) -> Formula:
    return Formula(
        KEEP_TEXT[algorithm].format(eps=VERL_EPS),
        lambda case, episodes: keep_single_members(algorithm, episodes, eps=VERL_EPS),
    )


SPEC = TrainerSpec(
    name="verl",
    version=lambda: package_version("verl"),
    load=_load,
    layout=_layout,
    estimators=(
        Estimator("reinforce", "xpgym_reinforce (registered estimator)", _run("xpgym_reinforce")),
        Estimator("rebn", "xpgym_rebn (registered estimator)", _run("xpgym_rebn")),
        Estimator(
            "rebn", "xpgym_rebn, per-turn rows (V1 list output)", _run("xpgym_rebn", "per_turn")
        ),
        Estimator(
            "rebn",
            "reinforce_plus_plus",
            _run("reinforce_plus_plus"),
            Formula(
                "per-token REINFORCE++: G over policy tokens (gamma per token), whitened over "
                "tokens: (G - mean) / sqrt(var_unbiased + 1e-8)",
                _rpp_formula,
            ),
        ),
        Estimator("grpo", "grpo", _run("grpo", norm_adv_by_std_in_grpo=True), _group_keep("grpo")),
        Estimator(
            "dr_grpo",
            "grpo, norm_adv_by_std_in_grpo=False",
            _run("grpo", norm_adv_by_std_in_grpo=False),
            _group_keep("dr_grpo"),
        ),
        Estimator("rloo", "rloo", _run("rloo"), _group_keep("rloo")),
    ),
)
