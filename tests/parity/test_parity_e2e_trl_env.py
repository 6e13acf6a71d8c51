"""End to end on CPU (`parity.e2e.runs`, run ``trl-env``): TRL's own
``GRPOTrainer(environment_factory=...)`` loop plays xpgym's env class
(`xpgym.adapters.trl.environment_class`) for real steps from the tool-calling warm model:
the model's tool calls are parsed by TRL and run on the env, and the env's reward is TRL's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("trl", reason="TRL is not installed (scripts/setup.sh installs it)")

from parity.e2e.config import E2EConfig
from parity.e2e.runs import TRAINERS, check, run, table
from xpgym.core.wrappers.episode_log import read_episode_log

STEPS = 2


@pytest.fixture(scope="module")
def result(warm_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The run, its tool-calling warm model cached next to the session's plain one (the
    machine's cache is left alone)."""
    out = tmp_path_factory.mktemp("parity_e2e_trl_env")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XPGYM_CACHE", str(warm_model.parent))
        results = run(["trl-env"], E2EConfig(steps=STEPS), out, warm_dir=warm_model)
    assert (out / "trl-env.json").exists()
    return results["trl-env"]


@pytest.mark.timeout(600)
def test_trls_environment_loop_trains_for_real_through_xpgyms_env_class(
    result: dict[str, Any],
) -> None:
    """No crash, every step done, policy tokens trained, every parameter moved, finite
    numbers, TRL's training rows hold the generated tokens where they were generated."""
    assert check(result, STEPS) == []
    assert len(result["loss"]) == len(result["grad_norm"]) == STEPS
    assert any(g > 0 for g in result["grad_norm"])
    idle = [
        k
        for k, (norm, alike) in enumerate(
            zip(result["grad_norm"], result["frac_reward_zero_std"], strict=True)
        )
        if norm <= 0 and alike < 1
    ]
    assert idle == []  # a step without gradient had nothing to learn: all groups alike
    assert "| trl-env | 2 |" in table({"trl-env": result})


@pytest.mark.timeout(600)
def test_the_models_tool_calls_run_on_the_env_and_its_reward_is_trls(
    result: dict[str, Any],
) -> None:
    assert sum(result["tool_calls"]) > 0
    np.testing.assert_allclose(result["trl_env_reward"], result["env_reward"], atol=1e-6)
    episodes = read_episode_log(Path(result["episode_log"]))
    batch = E2EConfig().tasks_per_step * E2EConfig().group_size
    assert 0 < len(episodes) <= STEPS * batch  # a rollout that called no tool is not logged
    assert {e["env_id"] for e in episodes} == {E2EConfig().warm.env}


def test_the_environment_run_is_registered_without_a_rollout_choice() -> None:
    assert TRAINERS["trl-env"].rollouts == ()
