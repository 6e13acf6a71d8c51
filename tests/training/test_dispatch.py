"""The algorithm name -> advantages dispatch exists once: `xpgym.training.advantages`.

`turn_advantages` is the only place a critic-free algorithm's name becomes advantages: a change
planted in what it dispatches to reaches both of its users, the reference trainer
(`xpgym.reference.trainer`) and the parity suite's reference (`parity.tokens.core.reference_turns`),
and both take their algorithm names from its `Literal`.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
random_byte_lm = pytest.importorskip("random_byte_lm")

from adapter_cases import GAMMA, episodes  # noqa: E402

import parity.tokens.core  # noqa: E402
from xpgym.reference.trainer import ALGORITHMS, Trainer, TrainerConfig  # noqa: E402
from xpgym.training import advantages  # noqa: E402
from xpgym.training.advantages import (  # noqa: E402
    ADVANTAGE_ALGORITHMS,
    CRITIC_FREE_ALGORITHMS,
    turn_rewards,
)

PLANTED = 7.0

ESTIMATOR = {  # algorithm -> the function of xpgym.training.advantages it dispatches to
    "reinforce": "discounted_returns",
    "rebn": "rebn",
    "grpo": "grpo",
    "dr_grpo": "dr_grpo",
    "rloo": "rloo",
}


def trainer_turn_advantages(algorithm: str) -> np.ndarray:
    """``[N, T]`` advantages of the reference trainer's batch of the `adapter_cases` episodes."""
    cfg = TrainerConfig(algorithm=algorithm, gamma=GAMMA, num_episodes=4, group_size=2)
    return Trainer(random_byte_lm.tiny_model(seed=0), cfg).make_batch(episodes()).turn_advantages


def parity_turn_advantages(algorithm: str) -> np.ndarray:
    return parity.tokens.core.reference_turns(algorithm, episodes(), GAMMA)


@pytest.mark.parametrize("algorithm", CRITIC_FREE_ALGORITHMS)
def test_a_change_planted_in_the_dispatch_reaches_the_trainer_and_parity(algorithm, monkeypatch):
    mask = turn_rewards(episodes())[1]
    before = trainer_turn_advantages(algorithm)
    np.testing.assert_array_equal(parity_turn_advantages(algorithm), before)

    real = getattr(advantages, ESTIMATOR[algorithm])
    monkeypatch.setattr(
        advantages, ESTIMATOR[algorithm], lambda *args, **kwargs: real(*args, **kwargs) + PLANTED
    )
    after = trainer_turn_advantages(algorithm)
    np.testing.assert_allclose(after[mask], before[mask] + PLANTED, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(parity_turn_advantages(algorithm), after)


def test_the_reference_trainer_trains_the_critic_free_algorithms_and_ppo():
    assert (*ADVANTAGE_ALGORITHMS, "ppo") == ALGORITHMS


def test_parity_holds_trainers_against_every_critic_free_algorithm():
    assert parity.tokens.core.ALGORITHMS == CRITIC_FREE_ALGORITHMS
