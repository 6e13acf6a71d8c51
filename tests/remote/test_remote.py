"""Remote envs: the HTTP session server and `RemoteEnv`, against real servers on 127.0.0.1.

Most tests use an in-process server (`BackgroundServer`, a uvicorn thread on a free port);
the dropped-connection test kills a server subprocess with SIGKILL in the middle of a step
(there `test:RemoteToy-v0` is `toy_envs.AnnouncingEnv`, which prints each step it begins).
`test:RemoteToy-v0` is `toy_envs.ToyEnv`: action ``"raise"`` raises, ``"sleep:<s>"`` sleeps.
`test:RemoteMeeting-v0` is `toy_envs.MeetingEnv`: ``"meet"`` waits at the test's barrier.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hang_guard import HANG_GUARD_S, wait_until

import xpgym
from xpgym.core.env import EpisodeFinishedError
from xpgym.core.registry import UnknownEnvError
from xpgym.core.vector import ProcessVectorEnv, SyncVectorEnv, ThreadVectorEnv
from xpgym.remote import BackgroundServer, RemoteEnv, RemoteEnvError, parse_remote_id

GUESS = "game:GuessTheNumber-v0"
TOY = "test:RemoteToy-v0"
MEETING = "test:RemoteMeeting-v0"
TESTS_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", autouse=True)
def _toy_registered() -> None:
    xpgym.register(TOY, "toy_envs:ToyEnv", override=True, episode_length=3)


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(["game:GuessTheNumber-*", "test:*"], max_sessions=64) as srv:
        yield srv


def remote(srv: BackgroundServer, env_id: str = GUESS, **kwargs) -> RemoteEnv:
    return RemoteEnv(srv.url, env_id, **kwargs)


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def register_meeting(parties: int) -> threading.Barrier:
    """(Re)register `MEETING` with a fresh barrier of `parties`; return the barrier."""
    barrier = threading.Barrier(parties, timeout=HANG_GUARD_S)
    xpgym.register(MEETING, "toy_envs:MeetingEnv", override=True, barrier=barrier)
    return barrier


def transcript(env, seed: int, actions: list[str]) -> list:
    out = [env.reset(seed=seed)]
    for action in actions:
        result = env.step(action)
        out.append(result)
        if result[2] or result[3]:
            break
    return out


ACTIONS = [r"\boxed{50}", "no box", r"\boxed{25}", r"\boxed{75}", r"\boxed{12}", r"\boxed{3}"]


# -- API ------------------------------------------------------------------------------------
def test_remote_transcript_equals_local_transcript_for_the_same_seed(server):
    local = xpgym.make(GUESS)
    with remote(server) as env:
        for seed in (0, 1, 7):
            assert transcript(env, seed, ACTIONS) == transcript(local, seed, ACTIONS)


def test_get_state_and_set_state_replay_the_episode(server):
    with remote(server) as env:
        env.reset(seed=3)
        env.step(r"\boxed{50}")
        state = env.get_state()
        first = [env.step(a) for a in ACTIONS[2:4]]
        env.set_state(state)
        assert [env.step(a) for a in ACTIONS[2:4]] == first


def test_sample_random_action_comes_from_the_remote_env(server):
    with remote(server) as env:
        env.reset(seed=0)
        action = env.sample_random_action()
        assert isinstance(action, str)
        assert r"\boxed{" in action


def test_lifecycle_is_enforced_locally(server):
    with remote(server) as env:
        with pytest.raises(xpgym.ResetNeededError):
            env.step("x")
        env.reset(seed=0)
        with pytest.raises(TypeError, match="str"):
            env.step(5)  # type: ignore[arg-type]
        for action in ACTIONS * 3:
            *_, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        with pytest.raises(EpisodeFinishedError):
            env.step("again")


def test_close_deletes_the_session_and_is_idempotent(server):
    env = remote(server)
    env.reset(seed=0)
    session = env.session_id
    assert session in server.store.sessions
    env.close()
    env.close()
    assert wait_until(lambda: session not in server.store.sessions)


def test_make_with_a_remote_id_returns_a_remote_env(server):
    remote_id = f"remote:{server.url}/{GUESS}"
    try:
        env = xpgym.make(remote_id, timeout=5.0)
    except UnknownEnvError:
        pytest.skip("registry hook for 'remote:' ids not installed yet")
    with env:
        assert isinstance(env, RemoteEnv)
        assert env.spec is not None
        assert env.spec.id == remote_id
        assert transcript(env, 0, ACTIONS) == transcript(xpgym.make(GUESS), 0, ACTIONS)


def test_parse_remote_id_splits_at_the_last_slash():
    assert parse_remote_id("remote:http://h:1/pre/game:X-v0") == ("http://h:1/pre", "game:X-v0")
    with pytest.raises(ValueError, match="remote:http"):
        parse_remote_id("remote:game:X-v0")


def test_env_kwargs_are_sent_to_the_server(server):
    with remote(server, min_number=1, max_number=2) as env:
        local = xpgym.make(GUESS, min_number=1, max_number=2)
        assert transcript(env, 4, ACTIONS) == transcript(local, 4, ACTIONS)


def test_remote_env_pickles_without_its_session(server):
    env = remote(server, timeout=7.0)
    env.reset(seed=0)
    copy = pickle.loads(pickle.dumps(env))
    assert (copy.url, copy.env_id, copy.timeout, copy.session_id) == (
        server.url,
        GUESS,
        7.0,
        None,
    )
    assert copy.reset(seed=1) == xpgym.make(GUESS).reset(seed=1)
    env.close()
    copy.close()


# -- server limits and errors ---------------------------------------------------------------
def test_health_reports_sessions_and_the_limit(server):
    health = get_json(server.url + "/health")
    assert health["status"] == "ok"
    assert health["max_sessions"] == 64
    before = health["sessions"]
    with remote(server) as env:
        env.reset(seed=0)
        assert env.health()["sessions"] == before + 1


def test_env_ids_outside_the_allowed_globs_are_refused(server):
    with pytest.raises(RemoteEnvError, match="not served here") as info:
        RemoteEnv(server.url, "game:Wordle-v0").reset()  # matches no glob
    assert info.value.status == 403


def test_unknown_env_ids_and_bad_kwargs_are_clear_errors(server):
    with pytest.raises(RemoteEnvError, match="unknown env id") as info:
        RemoteEnv(server.url, "test:Nope-v0").reset()
    assert info.value.status == 404
    with pytest.raises(RemoteEnvError, match="unexpected keyword") as info:
        RemoteEnv(server.url, GUESS, colour="red").reset()
    assert info.value.status == 400


def test_max_sessions_gives_503_with_a_clear_message():
    with BackgroundServer(["game:*"], max_sessions=2) as srv:
        envs = [RemoteEnv(srv.url, GUESS) for _ in range(3)]
        envs[0].reset(seed=0)
        envs[1].reset(seed=0)
        with pytest.raises(RemoteEnvError, match="maximum of 2 sessions") as info:
            envs[2].reset(seed=0)
        assert info.value.status == 503
        assert info.value.error_type == "TooManySessions"
        envs[0].close()
        assert wait_until(lambda: len(srv.store.sessions) == 1)
        envs[2].reset(seed=0)  # a freed slot can be used
        for env in envs:
            env.close()


def test_idle_sessions_are_reaped_and_reset_recreates_them():
    with BackgroundServer(["game:*"], idle_timeout=0.3) as srv:
        env = RemoteEnv(srv.url, GUESS)
        env.reset(seed=0)
        old = env.session_id
        assert wait_until(lambda: srv.store.sessions == {})  # the reaper closed it
        _, _, _, truncated, info = env.step(r"\boxed{1}")
        assert truncated
        assert "SessionNotFound" in info["error"]
        env.reset(seed=0)  # a new session, transparently
        assert env.session_id not in (None, old)
        env.close()


def test_env_exception_in_reset_raises_and_in_step_truncates(server):
    with remote(server, TOY) as env:
        first_obs, _ = env.reset(seed=0)
        obs, reward, terminated, truncated, info = env.step("raise")
        assert (obs, reward, terminated, truncated) == (first_obs, 0.0, False, True)
        assert "RuntimeError: toy failure" in info["error"]
        assert "toy_envs.py" in info["traceback"]
        with pytest.raises(EpisodeFinishedError):
            env.step("1")
        env.reset(seed=0)  # usable again after a reset
        assert env.step("1")[3] is False
    with pytest.raises(RemoteEnvError, match="seed must be") as info:
        remote(server, TOY).reset(seed=-1)
    assert info.value.error_type == "ValueError"
    assert "make_np_random" in info.value.remote_traceback


def test_a_step_slower_than_the_timeout_truncates_without_hanging(server):
    barrier = register_meeting(2)  # the step waits for the test, which waits for the step
    with remote(server, MEETING, timeout=0.5) as env:
        env.reset(seed=0)
        _, _, _, truncated, info = env.step("meet")
        barrier.wait()  # only now can the abandoned step finish on the server
        assert truncated
        assert "timed out after 0.5 s" in info["error"]
        env.reset(seed=0)  # a new session: the sleeping one is abandoned
        assert env.step("1")[3] is False


def test_sleeping_sessions_do_not_block_each_other(server):
    register_meeting(8)  # each step waits until all eight are in flight at once
    envs = [remote(server, MEETING) for _ in range(8)]
    for env in envs:
        env.reset(seed=0)
    results: dict[int, tuple] = {}
    threads = [
        threading.Thread(target=lambda i=i: results.update({i: envs[i].step("meet")}))
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i][0] for i in range(8)] == ["turn=1 last=meet"] * 8
    assert not any(results[i][3] for i in range(8))  # none truncated
    for env in envs:
        env.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVE_TOY = (
    "import xpgym, sys; from xpgym.remote.server import serve; "
    f"xpgym.register({TOY!r}, 'toy_envs:AnnouncingEnv'); "
    "serve(['test:*'], port=int(sys.argv[1]))"
)


def answers_health(url: str) -> bool:
    try:
        get_json(url + "/health")
    except (urllib.error.URLError, ConnectionError):
        return False
    return True


def test_a_killed_server_during_a_step_truncates_with_an_error():
    port = _free_port()
    env_vars = {
        **os.environ,
        "PYTHONPATH": f"{TESTS_DIR}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_TOY, str(port)],
        env=env_vars,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: answers_health(url)), "server subprocess did not start"
        env = RemoteEnv(url, TOY, timeout=30.0)
        first_obs, _ = env.reset(seed=0)
        announced: list[str] = []

        def kill_once_the_step_runs() -> None:
            announced.append(proc.stdout.readline())  # type: ignore[union-attr]
            proc.kill()

        killer = threading.Thread(target=kill_once_the_step_runs)
        killer.start()
        obs, _, _, truncated, info = env.step(f"sleep:{HANG_GUARD_S}")
        killer.join()
        assert announced == [f"step sleep:{HANG_GUARD_S}\n"]  # killed while the step ran
        assert truncated
        assert obs == first_obs
        assert info["error"].startswith("RemoteEnvError:")
        assert "timed out" not in info["error"]  # the dropped connection ended it
        with pytest.raises(RemoteEnvError, match="is the server running"):
            env.reset(seed=0)
        env.close()
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()  # type: ignore[union-attr]


# -- inside vector envs ---------------------------------------------------------------------
@pytest.mark.parametrize("vector_cls", [SyncVectorEnv, ThreadVectorEnv, ProcessVectorEnv])
def test_remote_sub_envs_match_local_sub_envs_in_every_vector_env(server, vector_cls):
    remote_fn = functools.partial(RemoteEnv, server.url, GUESS)
    local_fn = functools.partial(xpgym.make, GUESS)
    kwargs = {"num_workers": 2} if vector_cls is ProcessVectorEnv else {}
    with vector_cls([remote_fn] * 3, **kwargs) as venv, SyncVectorEnv([local_fn] * 3) as ref:
        assert venv.reset(seed=5)[0] == ref.reset(seed=5)[0]
        for action in ACTIONS:
            got, want = venv.step([action] * 3), ref.step([action] * 3)
            assert got[0] == want[0]
            assert got[1].tolist() == want[1].tolist()
            assert got[2].tolist() == want[2].tolist()


def test_a_failing_remote_sub_env_is_isolated_in_an_async_vector_env(server):
    fn = functools.partial(RemoteEnv, server.url, TOY)
    with ThreadVectorEnv([fn] * 2) as venv:
        venv.reset(seed=0)
        _, _, _, truncated, infos = venv.step(["raise", "1"])
        assert truncated.tolist() == [True, False]
        assert "toy failure" in infos[0]["error"]
