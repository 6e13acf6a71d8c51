"""Every trainer adapter keeps an infra-error episode out of the loss (`xpgym.core.errors`).

One batch for all six: group g0 of `adapter_cases` with its failed member, ``[A, B, E]``
(E ended on a grader timeout; its recorded reward, 5.0, would move g0's statistics if it
counted). For each adapter the test reads what the trainer's loss reads, as the adapter's
hook hands it over, and checks that

* E weighs nothing: no loss weight on any of its tokens;
* A and B keep their normal values: their loss weights and their advantages under the mean
  baseline (Dr.GRPO: the score minus its group's mean, which every one of the six trainers
  offers) are those of the batch ``[A, B]`` without E;
* the check is not vacuous: the same E *without* its marker does weigh, and moves A's and
  B's advantages.

Per trainer (the trainer's own advantage code where it runs on CPU here; elsewhere its
formula on the tensors it reads, which ``tests/adapters/test_adapter_<name>.py`` holds to
the trainer's code):

=========  ==================================================================================
verl       `to_data_proto` rows with the agent loop's ``uid`` (one per prompt: E in g0), verl's
           ``compute_advantage`` with ``ALGORITHMS["dr_grpo"]`` (``xpgym_grpo``, no std)
OpenRLHF   the ``Experience`` as the agent executor hands it (E's reward is its recorded
           total), then `fill_failed_rewards` (the override does it before OpenRLHF's own
           method), then OpenRLHF's ``dr_grpo`` over the block of ``n_samples_per_prompt``
RL2        `to_tensor_dict` (what `mask_infra_sample` leaves of E), RL2 0.0.2's own
           ``compute_advantages`` (``reinforce``, ``norm_var`` off) behind xpgym's override
TRL        `to_rollout_output`; TRL's group advantage over ``num_generations`` (no scaling)
ROLL       `trajectory_batch`; ``mean`` over ``traj_group_id`` of the row scores
Oat        `to_transition_data` rows; the batch mean of the rows' returns
=========  ==================================================================================

The std-normalised variants differ by trainer: verl, ROLL, Oat and RL2 (with the override)
are exact there too; OpenRLHF's and TRL's fixed blocks keep the failed member with the
healthy mean, which scales the others' GRPO/RLOO advantages by a known factor
(`xpgym.training.advantages.infra_filled_scores`).
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import sys
import types
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from adapter_cases import GAMMA, episodes, with_failed_member

from xpgym.core.trajectory import Episode
from xpgym.training.advantages import dr_grpo

torch = pytest.importorskip("torch")


@dataclasses.dataclass
class Trained:
    """What one episode puts into the loss.

    Attributes:
        weight: The sum of the loss weights over its tokens.
        advantages: The advantage on each of its tokens with a non-zero weight.
    """

    weight: float
    advantages: list[float]


def trained_rows(weights: np.ndarray, advantages: np.ndarray) -> Trained:
    """`Trained` of the rows of one episode (``[rows, T]`` weights and advantages)."""
    on = weights != 0
    return Trained(float(weights.sum()), advantages[on].astype(float).tolist())


def block_mean_baseline(scores: np.ndarray) -> np.ndarray:
    """The trainers' mean baseline over one group: ``s - mean(s)``."""
    return scores - scores.mean()


def verl_view(batch: list[Episode], request: pytest.FixtureRequest) -> list[Trained]:
    pytest.importorskip("xpgym.adapters.verl", reason="needs verl 0.9.x", exc_type=ImportError)
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.ray_trainer import compute_advantage

    from xpgym.adapters.verl import ALGORITHMS, to_data_proto

    data = to_data_proto(batch, pad_token_id=0)
    # verl's agent loop gives every sample of a prompt the prompt's uid, E's included
    data.non_tensor_batch["uid"] = np.array([ep.group_id for ep in batch], dtype=object)
    data.batch["token_level_rewards"] = data.batch["rm_scores"]
    estimator, by_std = ALGORITHMS["dr_grpo"]
    config = AlgoConfig(norm_adv_by_std_in_grpo=by_std)
    out = compute_advantage(data, adv_estimator=estimator, config=config)
    mask, adv = out.batch["response_mask"].numpy(), out.batch["advantages"].numpy()
    return [trained_rows(mask[i : i + 1], adv[i : i + 1]) for i in range(len(batch))]


def openrlhf_view(batch: list[Episode], request: pytest.FixtureRequest) -> list[Trained]:
    pytest.importorskip("xpgym.adapters.openrlhf", reason="needs openrlhf", exc_type=ImportError)
    from xpgym.adapters.openrlhf import fill_failed_rewards, to_experience

    experience = to_experience(batch, pad_token_id=0, n_samples_per_prompt=len(batch))
    # the agent executor passes each episode's recorded total, E's too
    experience.rewards = torch.tensor([ep.total_reward for ep in batch], dtype=torch.float32)
    fill_failed_rewards([experience], len(batch))
    adv = block_mean_baseline(experience.rewards.numpy().astype(float))
    mask = experience.action_mask.numpy()
    return [trained_rows(mask[i : i + 1], adv[i] * mask[i : i + 1]) for i in range(len(batch))]


@pytest.fixture(scope="module")
def rl2_compute_advantages() -> Iterator[Callable[..., None]]:
    """RL2 0.0.2's ``compute_advantages`` behind xpgym's override, as the trainer calls it
    (``RL2.trainer.ppo`` is a stand-in: the real one imports SGLang)."""
    pytest.importorskip("xpgym.adapters.rl2", reason="needs rl-square", exc_type=ImportError)
    from parity.shared.trainer_code import stand_ins
    from xpgym.adapters.rl2 import install_turn_advantages

    with stand_ins(["wandb"], packages=("RL2",)):
        algorithms = importlib.import_module("RL2.utils.algorithms")
        ppo = types.ModuleType("RL2.trainer.ppo")
        ppo.compute_advantages = algorithms.compute_advantages.__wrapped__  # type: ignore[attr-defined]
        trainer = types.ModuleType("RL2.trainer")
        trainer.ppo = ppo  # type: ignore[attr-defined]
        saved = {name: sys.modules.get(name) for name in ("RL2.trainer", "RL2.trainer.ppo")}
        sys.modules.update({"RL2.trainer": trainer, "RL2.trainer.ppo": ppo})
        try:
            install_turn_advantages()
            yield ppo.compute_advantages  # type: ignore[attr-defined]
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module


def rl2_view(batch: list[Episode], request: pytest.FixtureRequest) -> list[Trained]:
    from omegaconf import OmegaConf

    compute = request.getfixturevalue("rl2_compute_advantages")
    from xpgym.adapters.rl2 import to_tensor_dict

    tensor_dict, cu_seqs = to_tensor_dict(batch)
    config = OmegaConf.create(
        {
            "estimator": "reinforce",
            "gamma": 1.0,
            "lamda": 1.0,
            "responses_per_prompt": len(batch),
            "global_norm": False,
            "norm_var": False,
        }
    )
    compute(config, tensor_dict, cu_seqs, 0)
    mask, adv = tensor_dict["action_mask"].numpy(), tensor_dict["advantages"].numpy()
    bounds = cu_seqs.tolist()
    return [trained_rows(mask[a:b], adv[a:b]) for a, b in itertools.pairwise(bounds)]


def trl_view(batch: list[Episode], request: pytest.FixtureRequest) -> list[Trained]:
    pytest.importorskip("xpgym.adapters.trl", reason="needs trl 1.16", exc_type=ImportError)
    from xpgym.adapters.trl import to_rollout_output

    out = to_rollout_output(batch)  # what the rollout_func returns
    adv = block_mean_baseline(np.array(out["episode_reward"], dtype=float))
    masks = [np.array(mask, dtype=float) for mask in out["env_mask"]]
    return [trained_rows(m, adv[i] * m) for i, m in enumerate(masks)]


def roll_view(batch: list[Episode], request: pytest.FixtureRequest) -> list[Trained]:
    pytest.importorskip("xpgym.adapters.roll", reason="needs gem-llm", exc_type=ImportError)
    from xpgym.adapters.roll import trajectory_batch

    data = trajectory_batch(batch, pad_token_id=0, sequence_length=16)
    scores = np.asarray(data.batch["scores"], dtype=float).sum(axis=1)
    adv = dr_grpo(scores, list(data.non_tensor_batch["traj_group_id"]))
    mask = np.asarray(data.batch["response_mask"], dtype=float)
    return [trained_rows(mask[i : i + 1], adv[i] * mask[i : i + 1]) for i in range(len(batch))]


def oat_view(batch: list[Episode], request: pytest.FixtureRequest) -> list[Trained]:
    pytest.importorskip("xpgym.adapters.oat", reason="needs oat-llm", exc_type=ImportError)
    from xpgym.adapters.oat import to_transition_data

    rows = to_transition_data(batch, gamma=GAMMA)
    adv = block_mean_baseline(np.array([row.rewards[-1] for row in rows], dtype=float))
    out = []
    for e in range(len(batch)):
        mine = [(row, a) for row, a in zip(rows, adv, strict=True) if row.info["episode"] == e]
        tokens = [(len(row.response_ids), a) for row, a in mine if row.loss_mask]
        out.append(
            Trained(float(sum(n for n, _ in tokens)), [a for n, a in tokens for _ in range(n)])
        )
    return out


VIEWS: dict[str, Callable[[list[Episode], pytest.FixtureRequest], list[Trained]]] = {
    "verl": verl_view,
    "openrlhf": openrlhf_view,
    "rl2": rl2_view,
    "trl": trl_view,
    "roll": roll_view,
    "oat": oat_view,
}


def assert_same(got: list[Trained], want: list[Trained]) -> None:
    for g, w in zip(got, want, strict=True):
        assert g.weight == w.weight
        np.testing.assert_allclose(g.advantages, w.advantages, atol=1e-6)


@pytest.mark.parametrize("adapter", list(VIEWS))
def test_an_infra_error_episode_weighs_nothing_and_the_others_keep_their_values(
    adapter: str, request: pytest.FixtureRequest
) -> None:
    view = VIEWS[adapter]
    a, b, _, _, failed = with_failed_member()
    assert failed.outcome == "infra_error"
    got = view([a, b, failed], request)
    assert got[2].weight == 0.0
    assert got[2].advantages == []
    healthy = view(episodes()[:2], request)
    assert_same(got[:2], healthy)
    # Without its marker the same episode weighs and moves the others: the check can fail.
    unmarked = dataclasses.replace(failed, infra_error=None)
    leaky = view([a, b, unmarked], request)
    assert leaky[2].weight > 0
    assert not np.allclose(leaky[0].advantages, healthy[0].advantages)
