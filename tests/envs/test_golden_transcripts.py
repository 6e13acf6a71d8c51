"""Golden transcripts: each file in tests/golden replays exactly (see scripts/record_golden.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import xpgym

GOLDEN = sorted((Path(__file__).parent / "golden").glob("*.json"))


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_transcript_replays_exactly(path):
    golden = json.loads(path.read_text())
    env = xpgym.make(golden["env_id"])
    observation, _ = env.reset(seed=golden["seed"])
    assert observation == golden["reset_observation"]
    for i, step in enumerate(golden["steps"]):
        obs, reward, terminated, truncated, _ = env.step(step["action"])
        assert (obs, reward, terminated, truncated) == (
            step["observation"],
            step["reward"],
            step["terminated"],
            step["truncated"],
        ), f"{path.name}: step {i} ({step['action']!r}) differs; bump the env's version"
    env.close()


def test_every_offline_single_agent_env_has_a_golden_transcript():
    recorded = {json.loads(p.read_text())["env_id"] for p in GOLDEN}
    missing = [
        env_id
        for env_id in xpgym.list_envs()
        if not xpgym.spec(env_id).requires_download
        and not env_id.startswith("multiagent:")
        and env_id not in recorded
    ]
    assert not missing, f"record golden transcripts with scripts/record_golden.py: {missing}"
