"""xpgym envs as verifiers 0.4 environments (`xpgym.compat.verifiers`), played by verifiers' own
rollout machinery (`Env.serving`, `Env.run_slot`, its interception server and clients).

verifiers lives in a venv of its own (tests/interop_venvs.py), so each test runs
tests/compat/verifiers_rollouts.py there and reads its JSON; the model is a scripted
OpenAI-compatible endpoint inside that script, or a real ``vllm serve`` of the warm tiny model
(the `vllm_server` fixture). Rewards and episode ends are checked here, in the test venv, by
replaying each episode's recorded replies through `xpgym.make` with the same seed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from interop_venvs import side_python
from toy_envs import ToyEnv
from vllm_serve import SERVED_MODEL

import xpgym
from xpgym.core.env import Env
from xpgym.core.wrappers import MaxTurns

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("verifiers_rollouts.py")
GAME = "game:GuessTheNumber-v0-easy"
SEEDS = [0, 1, 2, 3]
RUN_S = 240
"""A hang guard for one run of the script (a scripted run takes ~6 s, a vLLM one ~20 s)."""


def _side_environ() -> dict[str, str]:
    environ = dict(os.environ)
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests")])
    return environ


def _side(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(side_python("verifiers")), *argv],
        cwd=ROOT,
        env=_side_environ(),
        capture_output=True,
        text=True,
        timeout=RUN_S,
        check=False,
    )


def _rollouts(specs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Run the script on the runs `specs` (name -> ``env_id``, ``seeds``, ``model``,
    ``max_tokens`` and the rest, see the script) in one process; return its JSON."""
    done = _side(str(SCRIPT), json.dumps(specs))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _scripted(model: str, env_id: str = "toy:Guess-v0", **spec: Any) -> dict[str, Any]:
    return {"env_id": env_id, "model": model, "max_tokens": 5, "scripted": True, **spec}


SCRIPTED_RUNS = {
    # the k-th reply is str(k): the toy env's guesses 0, 1, 2, ... for every seed at once
    "guessing": _scripted("count", seeds=SEEDS),
    "truncating": _scripted("count", seeds=[5], make_kwargs={"turn_limit": 2}),
    "raising": _scripted("raise", seeds=[0]),  # the toy env raises on the action "raise"
    "marking": _scripted("marker", env_id="toy:Marking-v0", seeds=[0]),
    "turn_limit": _scripted("count", seeds=[9], max_turns=2, system_prompt="Guess the digit."),
    "drifting": _scripted("count", env_id="toy:Drifting-v0", seeds=[0]),
}


@pytest.fixture(scope="module")
def scripted() -> dict[str, Any]:
    """The results of `SCRIPTED_RUNS`, played against the script's scripted endpoint."""
    return _rollouts(SCRIPTED_RUNS)


def _replay(env: Env, episode: dict[str, Any]) -> dict[str, Any]:
    """Play `episode`'s recorded replies in `env` from ``reset(seed)``: the return, the
    last step's flags and the observations the model should have been shown."""
    replies = [m["content"] for m in episode["messages"] if m["role"] == "assistant"]
    observation, _ = env.reset(seed=episode["seed"])
    observations, total = [observation], 0.0
    terminated = truncated = False
    for reply in replies:
        observation, reward, terminated, truncated, _ = env.step(reply)
        total += reward
        observations.append(observation)
    env.close()
    return {
        "return": total,
        "terminated": terminated,
        "truncated": truncated,
        "observations": observations[:-1],  # the last one ends the episode, unsent
        "steps": len(replies),
    }


def _assert_matches_replay(episode: dict[str, Any], replay: dict[str, Any]) -> None:
    summary = episode["xpgym"]
    assert episode["reward"] == replay["return"]
    assert episode["rewards"] == {"return": replay["return"]}
    assert summary["episode_return"] == replay["return"]
    assert (summary["terminated"], summary["truncated"]) == (
        replay["terminated"],
        replay["truncated"],
    )
    assert summary["steps"] == replay["steps"]
    shown = [m["content"] for m in episode["messages"] if m["role"] == "user"]
    assert shown == replay["observations"]


# ---------------------------------------------------------------- without a model


def test_importing_the_bridge_without_verifiers_names_the_fix() -> None:
    if importlib.util.find_spec("verifiers") is not None:
        pytest.skip("verifiers is installed in this venv")
    with pytest.raises(ImportError, match=r"xpgym.compat.verifiers needs verifiers.*pip install"):
        importlib.import_module("xpgym.compat.verifiers")


def test_importing_xpgym_imports_no_verifiers() -> None:
    done = _side("-c", "import sys, xpgym; print(sorted(m for m in sys.modules if 'verif' in m))")
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip() == "[]"


def test_each_episode_plays_turns_until_the_env_ends_it_and_scores_its_return(
    scripted: dict[str, Any],
) -> None:
    episodes = scripted["guessing"]["episodes"]
    assert [e["seed"] for e in episodes] == SEEDS
    for episode in episodes:
        assert episode["ok"], episode["errors"]
        assert episode["stop_condition"] == "terminated"
        _assert_matches_replay(episode, _replay(ToyEnv(episode_length=10), episode))
    assert max(e["xpgym"]["steps"] for e in episodes) > 1


def test_every_rollout_makes_its_own_env_and_closes_it(scripted: dict[str, Any]) -> None:
    # one env per rollout, and one that listed the tasks' first observations
    assert scripted["guessing"]["closes"] == [1] * (len(SEEDS) + 1)


def test_the_runs_sampling_settings_reach_the_endpoint(scripted: dict[str, Any]) -> None:
    assert scripted["guessing"]["max_tokens_sent"] == [5]


def test_an_env_that_truncates_ends_the_episode_as_truncated(scripted: dict[str, Any]) -> None:
    result = scripted["truncating"]
    (episode,) = result["episodes"]
    assert episode["ok"]
    assert episode["stop_condition"] == "truncated"
    _assert_matches_replay(episode, _replay(MaxTurns(ToyEnv(episode_length=10), 2), episode))
    assert (episode["xpgym"]["terminated"], episode["xpgym"]["truncated"]) == (False, True)


def test_a_step_that_raises_fails_the_rollout_as_an_infra_error_and_closes_the_env(
    scripted: dict[str, Any],
) -> None:
    result = scripted["raising"]
    (episode,) = result["episodes"]
    assert not episode["ok"]
    assert not episode["trace_ok"]
    assert episode["stop_condition"] == "infra_error"
    assert episode["xpgym"]["infra_error"]["kind"] == "sub_env_crash"
    assert episode["xpgym"]["truncated"]
    assert any(e.startswith("InfraError: sub_env_crash") for e in episode["errors"])
    assert result["closes"] == [1, 1]


def test_a_step_whose_info_has_the_infra_marker_fails_the_rollout(
    scripted: dict[str, Any],
) -> None:
    result = scripted["marking"]  # the env marks a grader timeout on the action "marker"
    (episode,) = result["episodes"]
    assert not episode["ok"]
    assert episode["stop_condition"] == "infra_error"
    summary = episode["xpgym"]
    assert summary["infra_error"] == {"kind": "grader_timeout", "message": "no verdict in 1 s"}
    assert (summary["steps"], summary["truncated"]) == (1, True)
    assert episode["reward"] == pytest.approx(-0.1)  # the marked step's own reward counts
    assert any(e.startswith("InfraError: grader_timeout") for e in episode["errors"])
    assert result["closes"] == [1, 1]


def test_verifiers_turn_limit_ends_the_exchange_before_the_env_does(
    scripted: dict[str, Any],
) -> None:
    result = scripted["turn_limit"]
    (episode,) = result["episodes"]
    assert episode["ok"]
    assert episode["stop_condition"] == "max_turns"
    assert episode["messages"][0] == {"role": "system", "content": "Guess the digit."}
    summary = episode["xpgym"]
    assert (summary["steps"], summary["terminated"], summary["truncated"]) == (2, False, False)
    assert episode["reward"] == pytest.approx(-0.2)
    assert result["closes"] == [1, 1]


def test_an_env_whose_reset_is_not_deterministic_fails_the_episode(
    scripted: dict[str, Any],
) -> None:
    result = scripted["drifting"]
    (episode,) = result["episodes"]
    assert not episode["ok"]
    assert any("reset is not deterministic" in error for error in episode["errors"])
    assert result["closes"] == [1, 1]


def test_a_multiagent_id_is_refused_when_the_tasks_are_listed() -> None:
    code = (
        "from xpgym.compat.verifiers import load_environment\n"
        "env = load_environment('multiagent:RockPaperScissors-v0')\n"
        "list(env.taskset)\n"
    )
    done = _side("-c", code)
    assert done.returncode != 0
    assert "TypeError: multiagent:RockPaperScissors-v0 is not a single-agent" in done.stderr


# ---------------------------------------------------------------- against vllm serve


@pytest.mark.timeout(360)  # the first use of the warm model builds it (~40 s), then vllm starts
def test_episodes_against_vllm_serve_score_the_envs_return_for_the_models_replies(
    vllm_server: str,
) -> None:
    spec = {"env_id": GAME, "seeds": SEEDS, "model": SERVED_MODEL, "max_tokens": 8}
    result = _rollouts({"vllm": {**spec, "base_url": vllm_server}})["vllm"]
    episodes = result["episodes"]
    assert [e["seed"] for e in episodes] == SEEDS
    for episode in episodes:
        assert episode["ok"], episode["errors"]
        _assert_matches_replay(episode, _replay(xpgym.make(GAME), episode))
        summary = episode["xpgym"]
        # the game allows 4 guesses: an episode stops short of them only on a right guess
        assert summary["steps"] == 4 or summary["terminated"]
        assert episode["stop_condition"] in {"terminated", "truncated"}
    assert max(e["xpgym"]["steps"] for e in episodes) > 1
    assert result["closes"] == [1] * (len(SEEDS) + 1)
