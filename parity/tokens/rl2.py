"""RL2 (rl-square 0.0.2): `xpgym.adapters.rl2.to_tensor_dict`, then RL2's own
``RL2.utils.algorithms.compute_advantages`` (unwrapped from its timing decorator).

``RL2.utils.algorithms`` imports ``wandb`` for logging; a stand-in is used where it is
missing (`parity.shared.trainer_code`). Groups are consecutive blocks of
``responses_per_prompt`` trajectories. Advantages are read at ``action_mask`` (shifted by one
token), sequences of a trajectory in order (``cu_seqs``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from parity.shared.trainer_code import package_version, stand_ins
from parity.tokens._formulas import EPS32, grpo_with
from parity.tokens._layout import check_padding, check_same
from parity.tokens.cases import Case, policy_positions, policy_tokens, token_rewards
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

_modules: dict[str, Any] = {}


@contextmanager
def _load() -> Iterator[None]:
    import xpgym.adapters.rl2  # noqa: F401  (imports RL2)

    with stand_ins(["wandb"], ["RL2"]):
        from omegaconf import OmegaConf
        from RL2.datasets import pack_tensor_dicts, state_dict_to_tensor_dict
        from RL2.utils.algorithms import compute_advantages

        _modules.update(
            compute=compute_advantages.__wrapped__,
            config=OmegaConf.create,
            pack=pack_tensor_dicts,
            to_tensor_dict=state_dict_to_tensor_dict,
        )
        try:
            yield
        finally:
            _modules.clear()


def _rows_per_episode(cu_seqs: Any) -> list[int]:
    return np.diff(cu_seqs.numpy()).tolist()


def _run(estimator: str, *, grouped: bool = True, **options: Any) -> Any:
    def run(case: Case, episodes: list[Episode]) -> TokenValues:
        from xpgym.adapters.rl2 import ESTIMATORS, to_tensor_dict, turn_advantages

        tensor_dict, cu_seqs = to_tensor_dict(episodes)
        n = equal_groups(episodes, "RL2", "responses_per_prompt") if grouped else 1
        config = _modules["config"](
            {
                "estimator": estimator,
                "gamma": case.gamma,
                "lamda": 1.0,
                "responses_per_prompt": n,
                "global_norm": False,
                "norm_var": True,
                **options,
            }
        )
        if estimator in ESTIMATORS:  # the adapter's override, as install_turn_advantages routes
            turn_advantages(config, tensor_dict, cu_seqs)
        else:
            _modules["compute"](config, tensor_dict, cu_seqs, 0)
        return read_masked(
            tensor_dict["advantages"].numpy(),
            tensor_dict["action_mask"].numpy(),
            _rows_per_episode(cu_seqs),
        )

    return run


def _state_dict(episode: Episode) -> dict[str, list]:
    """The episode as RL2 0.0.2's rollout accumulates it (``add_llm_response`` /
    ``add_env_response``), built from the turns directly."""
    last = episode.turns[-1]
    tokens = list(last.prompt_ids or []) + list(last.response_ids or [])
    positions = policy_positions(episode)
    mask = np.zeros(len(tokens), dtype=np.int64)
    mask[positions] = 1
    rewards = np.zeros(len(tokens))
    rewards[positions] = token_rewards(episode)
    logps = np.zeros(len(tokens))
    logps[positions] = [lp for t in episode.turns for lp in t.response_logprobs or []]
    return {
        "states": tokens,
        "actions": [t if m else 0 for t, m in zip(tokens, mask, strict=True)],
        "action_mask": mask.tolist(),
        "logps": logps.tolist(),
        "rewards": rewards.tolist(),
    }


def _layout(case: Case, episodes: list[Episode]) -> list[LayoutCheck]:
    from xpgym.adapters.rl2 import to_tensor_dict

    tensor_dict, cu_seqs = to_tensor_dict(episodes)
    td = {k: v.numpy() for k, v in tensor_dict.items()}
    rows = _rows_per_episode(cu_seqs)
    theirs = _modules["pack"]([_modules["to_tensor_dict"](_state_dict(ep)) for ep in episodes])
    same = sorted(theirs) == sorted(td) and all(
        theirs[k].dtype == tensor_dict[k].dtype and np.allclose(theirs[k].numpy(), td[k], atol=1e-7)
        for k in theirs
    )
    return [
        check_same(
            "actions[action_mask] are the policy tokens",
            read_masked(td["actions"], td["action_mask"], rows),
            [policy_tokens(ep) for ep in episodes],
        ),
        check_same(
            "rewards: each turn's reward on its last action position",
            read_masked(td["rewards"], td["action_mask"], rows),
            [token_rewards(ep) for ep in episodes],
            tol=TOL,
        ),
        LayoutCheck(
            "rewards, actions and llm_logps are 0 off action_mask",
            not any(
                td[k][td["action_mask"] == 0].any() for k in ("rewards", "actions", "llm_logps")
            ),
        ),
        LayoutCheck(
            "cu_seqs: one sequence per episode (token-exact prompts)",
            rows == [1] * len(episodes),
            str(rows),
        ),
        LayoutCheck("RL2's own state_dict_to_tensor_dict + pack_tensor_dicts give the same", same),
        *check_padding("states", _real_positions(episodes), side="right"),
        LayoutCheck(
            "states are each sequence's tokens 0 .. n-2, then 0",
            bool((np.where(_real_positions(episodes), td["states"], 0) == td["states"]).all())
            and bool((td["eos_mask"].argmax(1) == _real_positions(episodes).sum(1) - 1).all()),
        ),
    ]


def _real_positions(episodes: list[Episode]) -> np.ndarray:
    """``[N, L - 1]`` bool: the input positions ``0 .. n-2`` of each (unsplit) sequence."""
    lengths = np.array(
        [len(ep.turns[-1].prompt_ids) + len(ep.turns[-1].response_ids) for ep in episodes]
    )
    return np.arange(lengths.max() - 1) < (lengths - 1)[:, None]


SPEC = TrainerSpec(
    name="rl2",
    version=lambda: package_version("rl-square"),
    load=_load,
    layout=_layout,
    estimators=(
        Estimator(
            "reinforce",
            "xpgym override (adv.estimator=xpgym_reinforce)",
            _run("xpgym_reinforce", grouped=False),
        ),
        Estimator(
            "rebn", "xpgym override (adv.estimator=xpgym_rebn)", _run("xpgym_rebn", grouped=False)
        ),
        Estimator(
            "rebn",
            "reinforce, global_norm, norm_var",
            _run("reinforce", grouped=False, global_norm=True),
            Formula(
                "episode level: undiscounted episode totals (gamma ignored) normalised over the "
                "batch, unbiased std + float32 eps, on every action token",
                lambda case, episodes: grpo_with(episodes, eps=EPS32, one_group=True),
            ),
        ),
        Estimator(
            "grpo",
            "reinforce, norm_var",
            _run("reinforce"),
            Formula(
                "eps = float32 eps (1.19e-7; reference 1e-6)",
                lambda case, episodes: grpo_with(episodes, eps=EPS32),
            ),
        ),
        Estimator("dr_grpo", "reinforce, norm_var=false", _run("reinforce", norm_var=False)),
        Estimator("rloo", "(none)", why_not="RL2 has no RLOO estimator"),
    ),
)
