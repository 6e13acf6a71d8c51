"""``openenv:`` ids: OpenEnv's own server (its `create_app`, its base classes, in the openenv
side venv) played through `xpgym.make`, the reference collector, and a crash of the server.

The server is `openenv_own_server.py`: ``/guess`` (a text env with one string action field)
and ``/grid`` (an action of two integer fields, so the text is the action's JSON).
"""

from __future__ import annotations

import json
import pickle
import random
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence

import pytest
from interop_venvs import side_python
from own_server import OwnServer

import xpgym
from xpgym.core.chat import Prompt
from xpgym.core.errors import find_infra_cause
from xpgym.core.vector import SyncVectorEnv
from xpgym.remote import BackgroundServer, OpenEnvEnv, RemoteEnvError, parse_openenv_id
from xpgym.rollout.collector import collect_episodes
from xpgym.rollout.policies import Generation


@pytest.fixture(scope="module")
def server() -> Iterator[OwnServer]:
    srv = OwnServer(side_python("openenv"), "openenv_own_server.py")
    try:
        yield srv
    finally:
        srv.stop()


def guess_env(srv: OwnServer) -> OpenEnvEnv:
    env = xpgym.make(f"openenv:{srv.url}/guess")
    assert isinstance(env, OpenEnvEnv)
    return env


def target(seed: int) -> int:
    """The number the guess env draws for `seed` (its reset uses `random.Random(seed)`)."""
    return random.Random(seed).randint(1, 8)


def next_guess(texts: Sequence[str]) -> int:
    """Binary search over 1..8 given the conversation: prompt, then guess / hint pairs."""
    lo, hi = 1, 8
    for guess, hint in zip(texts[1::2], texts[2::2], strict=False):
        if hint == "higher":
            lo = int(guess) + 1
        elif hint == "lower":
            hi = int(guess) - 1
    return (lo + hi) // 2


class BinarySearch:
    """A batched chat policy that plays the guess env by binary search."""

    tokenizer = None

    def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
        texts = [[m["content"] for m in prompt] for prompt in prompts]  # type: ignore[index]
        return [Generation(text=str(next_guess(t))) for t in texts]


# -- ids ------------------------------------------------------------------------------------
def test_import_xpgym_imports_no_client_until_an_id_of_its_scheme_is_used() -> None:
    code = (
        "import sys, xpgym\n"
        "clients = ('websockets', 'http.client', 'xpgym.remote.openenv_client',"
        " 'xpgym.remote.ors_client')\n"
        "assert not [m for m in clients if m in sys.modules], 'imported at import xpgym'\n"
        "xpgym.spec('openenv:http://127.0.0.1:9')\n"
        "assert 'websockets' in sys.modules and 'xpgym.remote.ors_client' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_openenv_id_is_the_server_url() -> None:
    assert (
        parse_openenv_id("openenv:http://h:1/openenv/game:X-v0/") == "http://h:1/openenv/game:X-v0"
    )
    spec = xpgym.spec("openenv:http://127.0.0.1:9")
    assert (spec.entry_point, spec.kwargs) == (
        "xpgym.remote.openenv_client:OpenEnvEnv",
        {"url": "http://127.0.0.1:9"},
    )


@pytest.mark.parametrize(
    ("env_id", "message"),
    [
        ("openenv:", "names no server"),
        ("openenv:   ", "is not an http"),
        ("openenv:ws://127.0.0.1:8000", "is not an http"),
        ("openenv:127.0.0.1:8000", "is not an http"),
    ],
)
def test_an_openenv_id_without_a_server_url_is_a_clear_error(env_id: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        xpgym.make(env_id)
    assert "openenv:http://127.0.0.1:8000" in str(info.value)  # shows a good id


# -- whole episodes on OpenEnv's own server -------------------------------------------------
def test_make_plays_whole_episodes_with_the_text_in_the_string_field(server: OwnServer) -> None:
    with guess_env(server) as env:
        for seed in (0, 1, 2):
            obs, info = env.reset(seed=seed)
            assert obs == "Guess my number, from 1 to 8."
            assert info["openenv_observation"] == {"prompt": obs}
            texts, done, reward = [obs], False, 0.0
            while not done:
                guess = str(next_guess(texts))
                obs, reward, done, truncated, _ = env.step(guess)
                assert not truncated
                texts += [guess, obs]
            assert (obs, reward, texts[-2]) == ("Right!", 1.0, str(target(seed)))
        assert env.metadata["action_field"] == "message"
        assert env.remote_state()["target"] == target(2)


def test_an_action_of_several_fields_is_read_from_the_texts_json(server: OwnServer) -> None:
    with xpgym.make(f"openenv:{server.url}/grid") as env:
        obs, _ = env.reset()
        assert json.loads(obs) == {"x": 0, "y": 0}
        assert env.metadata["action_field"] is None
        obs, reward, done, _, _ = env.step('I go right: {"dx": 1, "dy": 0}')
        assert (json.loads(obs), reward, done) == ({"x": 1, "y": 0}, pytest.approx(-0.1), False)
        obs, reward, done, _, _ = env.step('{"dx": 1, "dy": 1}')
        assert (json.loads(obs), reward, done) == ({"x": 2, "y": 1}, 1.0, True)


@pytest.mark.parametrize(
    ("action", "problem"),
    [
        ("left", "no JSON object"),
        ('{"dx": 1', "invalid JSON"),
        ('{"dx": 1}', "missing required argument 'dy'"),
        ('{"dx": "one", "dy": 0}', "argument 'dx': expected integer"),
    ],
)
def test_a_bad_action_is_the_policys_and_the_episode_goes_on(
    server: OwnServer, action: str, problem: str
) -> None:
    with xpgym.make(f"openenv:{server.url}/grid") as env:
        env.reset()
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs.startswith("Invalid action:")
        assert problem in obs
        assert (reward, terminated, truncated, info["invalid_action"]) == (0.0, False, False, True)
        assert find_infra_cause(info) is None
        obs, _, _, _, info = env.step('{"dx": 0, "dy": 1}')
        assert json.loads(obs) == {"x": 0, "y": 1}
        assert "invalid_action" not in info


def test_an_env_that_raises_is_an_infra_error_and_the_next_reset_recovers(server) -> None:
    with guess_env(server) as env:
        first, _ = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("crash")
        assert (obs, reward, terminated, truncated) == (first, 0.0, False, True)
        cause = find_infra_cause(info)
        assert cause is not None
        assert (cause.kind, "EXECUTION_ERROR" in cause.message) == ("remote_error", True)
        assert "crashed on purpose" in cause.message
        assert env.reset(seed=0)[0] == first
        assert env.step(str(target(0)))[1] == 1.0


def test_a_group_snapshot_is_the_reset_and_a_mid_episode_one_is_refused(server) -> None:
    with guess_env(server) as env, guess_env(server) as other:
        env.reset(seed=5)
        snapshot = env.get_state()
        other.reset(seed=6)
        other.set_state(snapshot)
        assert other.step(str(target(5)))[1] == 1.0
        env.step("9")
        with pytest.raises(ValueError, match="mid-episode"):
            other.set_state(env.get_state())
        assert not env.can_fork()


def test_a_pickled_client_opens_its_own_session(server: OwnServer) -> None:
    env = guess_env(server)
    env.reset(seed=3)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.spec == env.spec
    assert copy.reset(seed=3) == env.reset(seed=3)
    assert copy.step(str(target(3)))[1] == 1.0
    env.close()
    copy.close()


def test_a_server_that_is_not_there_fails_the_reset_clearly() -> None:
    env = OpenEnvEnv("http://127.0.0.1:9", max_retries=0)
    with pytest.raises(RemoteEnvError, match="is the server running"):
        env.reset()


# -- the reference collector ----------------------------------------------------------------
def test_the_collector_collects_groups_of_episodes(server: OwnServer) -> None:
    vec = SyncVectorEnv([lambda: guess_env(server) for _ in range(2)])
    try:
        episodes = collect_episodes(vec, BinarySearch(), num_episodes=6, group_size=3, seed=11)
    finally:
        vec.close()
    assert [e.outcome for e in episodes] == ["ok"] * 6
    assert all(e.turns[-1].terminated and e.turns[-1].reward == 1.0 for e in episodes)
    for group in (episodes[0:3], episodes[3:6]):
        actions = {tuple(turn.action for turn in e.turns) for e in group}
        assert len(actions) == 1  # one start state per group: the same search
        assert len({e.group_id for e in group}) == 1


def test_a_server_killed_mid_episode_gives_infra_error_episodes() -> None:
    srv = OwnServer(side_python("openenv"), "openenv_own_server.py")

    class Stalls(BinarySearch):
        def generate(self, prompts: Sequence[Prompt]) -> list[Generation]:
            return [Generation(text="sleep") for _ in prompts]

    killed: list[str] = []

    def kill_once_a_step_runs() -> None:
        killed.append(srv.wait_for_step('"sleep"'))
        srv.proc.kill()

    killer = threading.Thread(target=kill_once_a_step_runs)
    killer.start()
    vec = SyncVectorEnv([lambda: guess_env(srv) for _ in range(2)])
    try:
        episodes = collect_episodes(vec, Stalls(), num_episodes=2, seed=0)
    finally:
        killer.join()
        vec.close()
        srv.stop()
    assert re.search(r'"message":\s*"sleep"', killed[0])  # killed while a step ran
    assert [e.outcome for e in episodes] == ["infra_error"] * 2
    for episode in episodes:
        assert episode.infra_error is not None
        assert episode.infra_error.kind == "remote_error"
        assert episode.turns[-1].truncated


# -- xpgym's own OpenEnv server ---------------------------------------------------------------
def test_xpgyms_own_openenv_server_plays_like_xpgym_make() -> None:
    """The text, rewards, both end flags and the env's info come through unchanged."""
    game = "game:GuessTheNumber-v0"
    actions = [r"\boxed{10}", "no box", *[r"\boxed{1}"] * 6]
    with BackgroundServer([game]) as srv, xpgym.make(f"openenv:{srv.url}/openenv/{game}") as env:
        local = xpgym.make(game)
        remote_obs, remote_info = env.reset(seed=3)
        local_obs, local_info = local.reset(seed=3)
        assert remote_obs == local_obs
        assert {k: remote_info.get(k) for k in local_info} == local_info
        for action in actions:
            *remote, remote_info = env.step(action)
            *expected, local_info = local.step(action)
            assert remote == expected
            assert {k: remote_info.get(k) for k in local_info} == local_info
            if expected[2] or expected[3]:
                break
        assert expected[3]  # a limit ended it: truncated, not terminated, on both
