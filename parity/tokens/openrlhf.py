"""OpenRLHF 0.11.x: `xpgym.adapters.openrlhf.to_experience`, then OpenRLHF's own
``RemoteExperienceMaker.compute_advantages_and_returns``.

That method lives in a module that imports ``flash_attn``, ``deepspeed`` and ``vllm`` (GPU
packages) at the top; the check imports it with empty stand-ins for the missing ones
(`parity.shared.trainer_code`), which the advantage code never touches. The method is called
on a minimal ``self`` carrying what it reads (OpenRLHF's CLI defaults: reward clip ±10, no
KL). Groups are consecutive blocks of ``n_samples_per_prompt`` episodes. Advantages are read
at ``action_mask`` (the next-token view: entry ``j`` is token ``j + 1``).
"""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from parity.shared.trainer_code import package_version, stand_ins
from parity.tokens._formulas import grpo_with, position_discounted_whitened
from parity.tokens._layout import check_padding, check_same
from parity.tokens.cases import Case, policy_tokens
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

GPU_ONLY = (
    "flash_attn",
    "flash_attn.bert_padding",
    "flash_attn.utils",
    "flash_attn.utils.distributed",
    "deepspeed",
    "deepspeed.runtime",
    "deepspeed.runtime.zero",
    "deepspeed.runtime.zero.partition_parameters",
    "vllm",
    "vllm.inputs",
    "vllm.utils",
)
REWARD_CLIP = 10.0

_modules: dict[str, Any] = {}


@contextmanager
def _load() -> Iterator[None]:
    import xpgym.adapters.openrlhf  # noqa: F401  (imports openrlhf)

    with stand_ins(GPU_ONLY, ["openrlhf"]):
        from openrlhf.models.utils import compute_reward
        from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker
        from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

        _modules.update(
            maker=RemoteExperienceMaker, samples=SamplesGenerator, compute_reward=compute_reward
        )
        try:
            yield
        finally:
            _modules.clear()


def _maker(estimator: str, gamma: float, n: int) -> Any:
    """The attributes of ``self`` that ``compute_advantages_and_returns`` reads."""
    args = types.SimpleNamespace(
        algo=types.SimpleNamespace(
            advantage=types.SimpleNamespace(
                estimator=estimator, gamma=gamma, lambd=1.0, no_std_norm=False
            )
        ),
        rollout=types.SimpleNamespace(n_samples_per_prompt=n),
        reward=types.SimpleNamespace(clip_range=(-REWARD_CLIP, REWARD_CLIP)),
    )
    self = types.SimpleNamespace(
        strategy=types.SimpleNamespace(args=args),
        kl_ctl=types.SimpleNamespace(value=0.0),
        advantage_estimator=estimator,
    )
    cls = _modules["maker"]
    self.get_cumulative_returns = lambda *a: cls.get_cumulative_returns(self, *a)
    self.get_advantages_and_returns = lambda *a: cls.get_advantages_and_returns(self, *a)
    return self


def _experience(case: Case, episodes: list[Episode], advantage: str | None = None) -> Any:
    from xpgym.adapters.openrlhf import make_label, to_experience
    from xpgym.rollout.runner import EpisodeTask

    labels = [
        make_label(
            EpisodeTask(ep.env_id, ep.seed, ep.group_id), advantage=advantage, gamma=case.gamma
        )
        for ep in episodes
    ]
    return to_experience(episodes, pad_token_id=0, labels=labels)


def _run(estimator: str, *, grouped: bool, override: str | None = None) -> Any:
    def run(case: Case, episodes: list[Episode]) -> TokenValues:
        import torch

        from xpgym.adapters.openrlhf import install_turn_rebn

        n = equal_groups(episodes, "OpenRLHF", "--rollout.n_samples_per_prompt") if grouped else 1
        experience = _experience(case, episodes, override)
        experience.kl = torch.zeros_like(experience.action_mask, dtype=torch.float32)
        maker = _modules["maker"]
        saved = maker.__dict__["compute_advantages_and_returns"]
        try:
            if override is not None:
                install_turn_rebn()  # the adapter's override, in OpenRLHF's method slot
            gamma = case.gamma if estimator == "reinforce" else 1.0  # OpenRLHF forces 1 else
            (out,) = maker.compute_advantages_and_returns(_maker(estimator, gamma, n), [experience])
        finally:
            maker.compute_advantages_and_returns = saved
        return read_masked(out.advantages.numpy(), out.action_mask.numpy(), [1] * len(episodes))

    return run


def _layout(case: Case, episodes: list[Episode]) -> list[LayoutCheck]:
    import torch

    from xpgym.adapters.openrlhf import agent_output

    experience = _experience(case, episodes)
    sequences = experience.sequences.numpy()
    action_mask = experience.action_mask.numpy()
    rows = [1] * len(episodes)
    placed = _modules["compute_reward"](
        experience.rewards,
        0.0,
        torch.zeros_like(experience.action_mask, dtype=torch.float32),
        action_mask=experience.action_mask,
        reward_clip_range=(-REWARD_CLIP, REWARD_CLIP),
    ).numpy()
    totals = [np.zeros(len(policy_tokens(ep))) for ep in episodes]
    for total, ep in zip(totals, episodes, strict=True):
        total[-1] = ep.total_reward
    checks = [
        check_same(
            "sequences[:, 1:][action_mask] are the policy tokens",
            read_masked(sequences[:, 1:], action_mask, rows),
            [policy_tokens(ep) for ep in episodes],
        ),
        check_same(
            "OpenRLHF's compute_reward puts the episode total on the last policy token",
            read_masked(placed, action_mask, rows),
            totals,
            tol=TOL,
        ),
        LayoutCheck(
            "labels carry the per-turn rewards (read by the per-turn override)",
            all(
                json.loads(label)["turn_rewards"] == [t.reward for t in ep.turns]
                for ep, label in zip(episodes, experience.labels, strict=True)
            ),
        ),
        LayoutCheck(
            "action_mask is [B, T - 1]",
            action_mask.shape == (len(episodes), sequences.shape[1] - 1),
            f"{action_mask.shape} for sequences {sequences.shape}",
        ),
        *check_padding("sequences", experience.attention_mask.numpy(), side="right"),
    ]
    ours = [_experience(case, [ep]) for ep in episodes]
    theirs = [
        _modules["samples"]._process_response_into_experience(
            None, agent_output(ep, prompt="p", label=None), max_len=10**6
        )
        for ep in episodes
    ]
    same = all(
        getattr(a, key).tolist() == getattr(b, key).tolist()
        for a, b in zip(ours, theirs, strict=True)
        for key in ("sequences", "attention_mask", "action_mask", "rollout_log_probs", "rewards")
    )
    checks.append(
        LayoutCheck("OpenRLHF's own SamplesGenerator builds the same rows from the executor", same)
    )
    return checks


def _reinforce_formula(case: Case, episodes: list[Episode]) -> TokenValues:
    return position_discounted_whitened(
        episodes,
        case.gamma,
        clip=REWARD_CLIP,
        std="population",
        eps=1e-8,
        eps_placement="clamp",
    )


SPEC = TrainerSpec(
    name="openrlhf",
    version=lambda: package_version("openrlhf"),
    load=_load,
    layout=_layout,
    estimators=(
        Estimator(
            "reinforce",
            "xpgym override (install_turn_rebn), advantage=reinforce",
            _run("reinforce", grouped=False, override="reinforce"),
        ),
        Estimator(
            "rebn",
            "xpgym override (install_turn_rebn), advantage=rebn",
            _run("reinforce", grouped=False, override="rebn"),
        ),
        Estimator(
            "rebn",
            "reinforce",
            _run("reinforce", grouped=False),
            Formula(
                "episode total on the last action token, discounted per sequence position "
                "(env tokens too), whitened over action tokens: (G - mean) * "
                "rsqrt(max(var_population, 1e-8))",
                _reinforce_formula,
            ),
        ),
        Estimator(
            "grpo",
            "group_norm",
            _run("group_norm", grouped=True),
            Formula(
                "eps 1e-9 (reference 1e-6)",
                lambda case, episodes: grpo_with(episodes, eps=1e-9, lone="nan"),
            ),
        ),
        Estimator("dr_grpo", "dr_grpo", _run("dr_grpo", grouped=True)),
        Estimator("rloo", "rloo", _run("rloo", grouped=True)),
    ),
)
