"""TRL (trl 1.16): `xpgym.adapters.trl.to_rollout_output`, through TRL's own scoring step.

The golden episodes are replayed as the ``rollout_func`` output of a real ``GRPOTrainer``
(a tiny random model that is never run: the default config needs no forward pass to
score a batch), and TRL's ``_generate_and_score_completions`` builds the batch: padding,
``tool_mask`` from ``env_mask``, the reward function, the group statistics and the
advantages. ``grpo`` / ``dr_grpo`` are TRL's own code (``scale_rewards="group"`` /
``"none"``); ``reinforce`` / ``rebn`` are xpgym's ``TurnCreditGRPOTrainer`` (per-token
``(B, T)`` advantages). TRL groups rows as consecutive blocks of ``num_generations``, set per
case. Advantages are read at ``completion_mask * tool_mask``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from parity.shared.trainer_code import package_version
from parity.tokens._formulas import grpo_with
from parity.tokens._layout import check_padding, check_same
from parity.tokens.cases import Case, per_token, policy_tokens
from parity.tokens.core import (
    TOL,
    Estimator,
    Formula,
    LayoutCheck,
    TokenValues,
    TrainerSpec,
    equal_groups,
    read_masked,
)
from xpgym.core.trajectory import Episode

__all__ = ["SPEC"]

TRL_EPS = 1e-4
"""TRL's eps, added to the unbiased group std (``(r - mean) / (std + 1e-4)``)."""

_trainer: dict[str, Any] = {}


@contextmanager
def _load() -> Iterator[None]:
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental
    from datasets import Dataset
    from trl import GRPOConfig

    from xpgym.adapters.trl import TurnCreditGRPOTrainer, episode_reward
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    with tempfile.TemporaryDirectory() as out_dir:
        args = GRPOConfig(
            output_dir=out_dir,
            use_cpu=True,
            per_device_train_batch_size=2,
            num_generations=2,
            report_to=[],
            save_strategy="no",
        )
        trainer = TurnCreditGRPOTrainer(
            model=build_tiny_model(tokenizer, hidden_size=16, num_layers=1, num_heads=2),
            processing_class=tokenizer,
            reward_funcs=episode_reward,
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["unused", "unused"]}),
            rollout_func=lambda prompts, trainer: {},
        )
        trainer.model.train()  # TRL scores training batches in train mode
        _trainer["trainer"] = trainer
        try:
            yield
        finally:
            _trainer.clear()


def _score(case: Case, episodes: list[Episode], **settings: Any) -> dict[str, Any]:
    """TRL's batch for `episodes`: the trainer's attributes set from `settings` for the call
    (``num_generations`` from the case's groups), then put back."""
    from trl import GRPOTrainer

    from xpgym.adapters.trl import TurnCreditGRPOTrainer, to_rollout_output

    trainer = _trainer["trainer"]
    turn_credit = settings.pop("turn_credit", False)
    if "num_generations" not in settings:
        settings["num_generations"] = equal_groups(episodes, "TRL", "num_generations")
    settings = {
        "rollout_func": lambda prompts, trainer: to_rollout_output(episodes),
        "gamma": case.gamma,
        **settings,
    }
    saved = {name: getattr(trainer, name) for name in settings}
    try:
        for name, value in settings.items():
            setattr(trainer, name, value)
        score = (
            TurnCreditGRPOTrainer if turn_credit else GRPOTrainer
        )._generate_and_score_completions
        return score(trainer, [{"prompt": "replayed"} for _ in episodes])
    finally:
        for name, value in saved.items():
            setattr(trainer, name, value)


def _loss_mask(batch: dict[str, Any]) -> np.ndarray:
    return (batch["completion_mask"] * batch["tool_mask"]).numpy()


def _run(**settings: Any) -> Any:
    def run(case: Case, episodes: list[Episode]) -> TokenValues:
        per_turn = {"num_generations": len(episodes)} if settings.get("turn_credit") else {}
        batch = _score(case, episodes, **per_turn, **settings)
        advantages = batch["advantages"].numpy()
        if advantages.ndim == 1:  # TRL's scalar per completion, on every trained token
            return [
                per_token(ep, np.full(len(ep.turns), advantages[e]))
                for e, ep in enumerate(episodes)
            ]
        return read_masked(advantages, _loss_mask(batch), [1] * len(episodes))

    return run


def _layout(case: Case, episodes: list[Episode]) -> list[LayoutCheck]:
    # Neither the layout nor per-turn credit depends on the groups: one group of all.
    batch = _score(
        case, episodes, num_generations=len(episodes), turn_credit=True, turn_advantage="reinforce"
    )
    mask = _loss_mask(batch)
    rows = [1] * len(episodes)
    prompt_mask = batch["prompt_mask"].numpy()
    return [
        check_same(
            "completion_ids at completion_mask * tool_mask (trained) are the policy tokens",
            read_masked(batch["completion_ids"].numpy(), mask, rows),
            [policy_tokens(ep) for ep in episodes],
        ),
        check_same(
            "prompt_ids (left-padded) are each episode's first prompt",
            read_masked(batch["prompt_ids"].numpy(), prompt_mask, rows),
            [np.asarray(ep.turns[0].prompt_ids) for ep in episodes],
        ),
        check_same(
            "sampling_per_token_logps on trained tokens are the sampler's",
            read_masked(batch["sampling_per_token_logps"].numpy(), mask, rows),
            [np.concatenate([t.response_logprobs for t in ep.turns]) for ep in episodes],
            tol=TOL,
        ),
        *check_padding("prompt_ids", prompt_mask, side="left"),
        *check_padding("completion_ids", batch["completion_mask"].numpy(), side="right"),
    ]


SPEC = TrainerSpec(
    name="trl",
    version=lambda: package_version("trl"),
    load=_load,
    layout=_layout,
    estimators=(
        Estimator(
            "reinforce",
            "TurnCreditGRPOTrainer(turn_advantage=reinforce)",
            _run(turn_credit=True, turn_advantage="reinforce"),
        ),
        Estimator(
            "rebn",
            "TurnCreditGRPOTrainer(turn_advantage=rebn)",
            _run(turn_credit=True, turn_advantage="rebn"),
        ),
        Estimator(
            "grpo",
            'scale_rewards="group"',
            _run(scale_rewards="group"),
            Formula(
                f"eps = {TRL_EPS:g} added to the unbiased std (reference 1e-6)",
                lambda case, episodes: grpo_with(episodes, eps=TRL_EPS),
            ),
        ),
        Estimator("dr_grpo", 'scale_rewards="none"', _run(scale_rewards="none")),
        Estimator("rloo", "(none)", why_not="TRL's GRPOTrainer has no RLOO estimator"),
    ),
)
