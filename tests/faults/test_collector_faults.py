"""The rollout collector over a `ProcessVectorEnv` whose worker is killed mid-step
(`xpgym.rollout.collector`, the infra-error rule of `xpgym.core.errors`).

Four sub-envs on two workers; the episodes on sub-envs 0 and 2 (worker 0) are in flight
when sub-env 0's step is killed. Documented: those episodes end with
``outcome == "infra_error"`` (a crashed sub-env), the others are ``"ok"``, the collection goes
on to its last episode on the replaced worker, and the infra-error episodes are kept out of
the gradient: each in a training group of its own, counted in the metrics.
"""

from __future__ import annotations

import functools
import signal
from pathlib import Path
from typing import Any

import pytest
from fault_envs import FaultEnv, signal_when

from xpgym.core.trajectory import INFRA_GROUP_PREFIX, infra_error_metrics, training_group_ids
from xpgym.core.vector import ProcessVectorEnv
from xpgym.rollout.collector import collect_episodes
from xpgym.rollout.policies import Generation

pytestmark = pytest.mark.usefixtures("no_orphans")


class Wrong:
    """A batched policy that always answers ``"x"`` (never the secret digit)."""

    tokenizer = None

    def generate(self, prompts: list[Any]) -> list[Generation]:
        return [Generation(text="x") for _ in prompts]


def test_episodes_of_a_killed_worker_are_infra_errors_and_the_rest_are_not(
    marker_dir: Path,
) -> None:
    fns = [
        functools.partial(FaultEnv, str(marker_dir), str(i), "step" if i == 0 else "", "stall", 2)
        for i in range(4)
    ]
    with ProcessVectorEnv(fns, num_workers=2) as vec:
        signaller = signal_when(marker_dir, "step", signal.SIGKILL)
        episodes = collect_episodes(vec, Wrong(), num_episodes=8, seed=0)
        signaller.result()
    outcomes = [episode.outcome for episode in episodes]
    assert outcomes == ["infra_error", "ok", "infra_error"] + ["ok"] * 5
    for episode in (episodes[0], episodes[2]):
        assert episode.infra_error is not None
        assert episode.infra_error.kind == "sub_env_crash"
        assert len(episode.turns) == 1
        assert episode.turns[-1].truncated
    assert all(len(episode.turns) == 2 for episode in episodes[3:])
    groups = training_group_ids(episodes)
    assert [g.startswith(INFRA_GROUP_PREFIX) for g in groups] == [o != "ok" for o in outcomes]
    assert infra_error_metrics(episodes) == {
        "infra_error_episodes": 2.0,
        "infra_error_episodes/sub_env_crash": 2.0,
    }
