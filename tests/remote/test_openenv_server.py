"""xpgym envs served in OpenEnv's protocol at ``/openenv/<env id>`` (`xpgym.remote.openenv_server`).

OpenEnv's own `GenericEnvClient` plays whole episodes in the openenv side venv
(`openenv_client_script.py`, a subprocess) against a `BackgroundServer` started here, and
each episode must equal the one `xpgym.make` plays with the same seed and actions. The error
paths are raw WebSocket frames (the `websockets` client) and raw HTTP requests. The rate
limit runs on a frozen clock (no sleeps, nothing refills).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hang_guard import HANG_GUARD_S, wait_until
from interop_venvs import side_python
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

import xpgym
from xpgym.core import registry
from xpgym.core.env import Env
from xpgym.remote import BackgroundServer
from xpgym.remote.server import EnvServer

GUESS = "game:GuessTheNumber-v0"
TOOL = "world:GridWorld-v0-actions"
TOOLGYM = "toolgym:EditDistance-v0-easy"
OPTIONS = "test:OpenEnvOptions-v0"
TOKEN = "openenv-test-token-0123456789"
SCRIPT = Path(__file__).with_name("openenv_client_script.py")


class OptionsEnv(Env[str]):
    """Shows the options of its last reset in its observation; every step ends the episode."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return json.dumps(options, sort_keys=True), {}

    def step(self, action: str):
        return "over", 0.0, True, False, {}


@pytest.fixture(scope="module", autouse=True)
def _options_env_registered() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "registry", dict(registry.registry))  # no id left behind
        xpgym.register(OPTIONS, OptionsEnv)
        yield


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    patterns = [GUESS, TOOL, TOOLGYM, OPTIONS]
    with BackgroundServer(patterns, token=TOKEN, max_action_chars=64, max_body_bytes=512) as srv:
        yield srv


def ws_url(srv: BackgroundServer, env_id: str) -> str:
    return srv.url.replace("http://", "ws://") + f"/openenv/{env_id}/ws"


def open_ws(srv: BackgroundServer, env_id: str = GUESS, token: str | None = TOKEN):
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return connect(ws_url(srv, env_id), additional_headers=headers, open_timeout=HANG_GUARD_S)


def ask(ws: ClientConnection, message: Any) -> dict[str, Any]:
    """Send `message` (JSON unless it is already a str) and return the reply frame."""
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return json.loads(ws.recv(timeout=HANG_GUARD_S))


def http(srv: BackgroundServer, method: str, path: str, body: Any = None, token=TOKEN):
    """``(status, JSON body)`` of one request to ``/openenv/<path>``."""
    request = urllib.request.Request(
        f"{srv.url}/openenv/{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}"} if token else {},
    )
    try:
        with urllib.request.urlopen(request, timeout=HANG_GUARD_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def random_actions(env_id: str, seed: int) -> list[str]:
    """The env's own random actions for one whole episode of `seed` (at most 50 steps)."""
    env = xpgym.make(env_id)
    env.reset(seed=seed)
    actions: list[str] = []
    done = False
    while not done and len(actions) < 50:
        actions.append(env.sample_random_action())
        _, _, terminated, truncated, _ = env.step(actions[-1])
        done = terminated or truncated
    env.close()
    return actions


def local_results(env_id: str, seed: int, actions: list[str]) -> list[dict[str, Any]]:
    """The episode through `xpgym.make`, each result as OpenEnv's ``StepResult`` fields."""
    env = xpgym.make(env_id)
    obs, info = env.reset(seed=seed)
    flags = {"terminated": False, "truncated": False}
    results = [{"text": obs, "info": info, "reward": None, "done": False, "metadata": flags}]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        flags = {"terminated": terminated, "truncated": truncated}
        done = terminated or truncated
        results.append(
            {"text": obs, "info": info, "reward": reward, "done": done, "metadata": flags}
        )
    env.close()
    return json.loads(json.dumps(results))  # tuples become lists, as on the wire


PARITY = [(GUESS, 3), (TOOL, 0), (TOOLGYM, 1)]
"""(env id, seed) of the whole episodes played both ways: a game, a tool env, a toolgym env."""


@pytest.fixture(scope="module")
def openenv_plays(server) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Every play of the OpenEnv client tests in one run of `openenv_client_script.py` (its
    venv takes seconds to import): name -> (the play, the client's answer)."""
    plays = {
        f"parity {env_id}": {
            "env_id": env_id,
            "seed": seed,
            "actions": random_actions(env_id, seed),
        }
        for env_id, seed in PARITY
    }
    plays["truncated"] = {"env_id": GUESS, "seed": 0, "actions": [r"\boxed{0}"] * 7}
    plays["wrong token"] = {"env_id": GUESS, "seed": 0, "actions": [], "token": "wrong"}
    plays["not served"] = {"env_id": "game:Wordle-v0", "seed": 0, "actions": []}
    for play in plays.values():
        play.setdefault("token", TOKEN)
    done = subprocess.run(
        [str(side_python("openenv")), str(SCRIPT)],
        input=json.dumps({"url": server.url, "plays": list(plays.values())}),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answers = json.loads(done.stdout)
    return {name: (plays[name], answer) for name, answer in zip(plays, answers, strict=True)}


# -- OpenEnv's own client ---------------------------------------------------------------
@pytest.mark.parametrize(("env_id", "seed"), PARITY)
def test_generic_env_client_plays_a_whole_episode_as_make_does(openenv_plays, env_id, seed):
    play, answer = openenv_plays[f"parity {env_id}"]
    assert "error" not in answer, answer.get("error")
    got = [
        {
            "text": r["observation"]["text"],
            "info": r["observation"]["info"],
            "reward": r["reward"],
            "done": r["done"],
            "metadata": r["metadata"],
        }
        for r in answer["results"]
    ]
    assert got == local_results(env_id, seed, play["actions"])
    assert got[-1]["done"]  # a whole episode
    assert answer["state"]["step_count"] == len(play["actions"])
    assert answer["state"]["env_id"] == env_id


def test_a_truncated_episode_keeps_truncated_apart_from_terminated(openenv_plays):
    _, answer = openenv_plays["truncated"]  # out of range guesses: 7 turns end it
    last = answer["results"][-1]
    assert last["done"] is True
    assert last["metadata"] == {"terminated": False, "truncated": True}
    assert last["observation"]["metadata"] == last["metadata"]


def test_generic_env_client_with_a_wrong_token_is_refused_at_the_handshake(openenv_plays):
    _, answer = openenv_plays["wrong token"]
    assert answer["error"].startswith("ConnectionError")
    assert "HTTP 401" in answer["error"]


def test_generic_env_client_raises_the_factory_error_for_an_id_not_served(openenv_plays):
    _, answer = openenv_plays["not served"]
    assert answer["error"].startswith("RuntimeError: Server error: env id 'game:Wordle-v0'")
    assert answer["error"].endswith("(code: FACTORY_ERROR)")


# -- the WebSocket session, frame by frame ----------------------------------------------
def test_reset_step_state_and_close_over_raw_frames(server):
    with open_ws(server) as ws:
        reset = ask(ws, {"type": "reset", "data": {"seed": 5, "episode_id": "ep-1"}})
        assert reset["type"] == "observation"
        obs, _info = xpgym.make(GUESS).reset(seed=5)
        assert reset["data"]["observation"]["text"] == obs
        assert reset["data"]["reward"] is None
        assert reset["data"]["done"] is False
        step = ask(ws, {"type": "step", "data": {"message": r"\boxed{10}", "metadata": {}}})
        assert step["type"] == "observation"
        assert isinstance(step["data"]["reward"], float)
        state = ask(ws, {"type": "state"})
        assert state == {
            "type": "state",
            "data": {"episode_id": "ep-1", "step_count": 1, "env_id": GUESS},
        }
        ws.send(json.dumps({"type": "close"}))
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=HANG_GUARD_S)
    assert wait_until(lambda: not server.store.sessions)


def test_one_connection_is_one_session_closed_when_the_socket_closes(server):
    with open_ws(server) as first, open_ws(server) as second:
        ask(first, {"type": "reset", "data": {"seed": 1}})
        ask(second, {"type": "reset", "data": {"seed": 1}})
        assert len(server.store.sessions) == 2
    assert wait_until(lambda: not server.store.sessions)


def test_sessions_on_several_connections_at_once_play_their_own_episodes(server):
    actions = {seed: random_actions(GUESS, seed) for seed in range(4)}

    def play(seed: int) -> list[dict[str, Any]]:
        with open_ws(server) as ws:
            frames = [ask(ws, {"type": "reset", "data": {"seed": seed}})]
            frames += [ask(ws, {"type": "step", "data": {"message": a}}) for a in actions[seed]]
        return [
            {
                "text": f["data"]["observation"]["text"],
                "info": f["data"]["observation"]["info"],
                "reward": f["data"]["reward"],
                "done": f["data"]["done"],
                "metadata": f["data"]["metadata"],
            }
            for f in frames
        ]

    with ThreadPoolExecutor(len(actions)) as pool:
        played = list(pool.map(play, actions))
    assert played == [local_results(GUESS, seed, actions[seed]) for seed in actions]


def test_reset_kwargs_other_than_seed_and_episode_id_are_episode_options(server):
    with open_ws(server, OPTIONS) as ws:
        data = {"seed": 0, "options": {"a": 1}, "difficulty": "hard"}
        reply = ask(ws, {"type": "reset", "data": data})
        assert json.loads(reply["data"]["observation"]["text"]) == {"a": 1, "difficulty": "hard"}
        clash = ask(ws, {"type": "reset", "data": {"options": {"a": 1}, "a": 2}})
        assert clash["data"]["code"] == "VALIDATION_ERROR"


@pytest.mark.parametrize(
    ("frame", "code", "error_type"),
    [
        ("{not json", "INVALID_JSON", "InvalidJSON"),
        ({"type": "render"}, "UNKNOWN_TYPE", "UnknownMessageType"),
        ({"data": {}}, "UNKNOWN_TYPE", "UnknownMessageType"),
        ([1, 2], "VALIDATION_ERROR", "InvalidMessage"),
        ({"type": "state", "extra": 1}, "VALIDATION_ERROR", "InvalidMessage"),
        ({"type": "step"}, "VALIDATION_ERROR", "InvalidField"),
        ({"type": "step", "data": {"text": "hi"}}, "VALIDATION_ERROR", "InvalidAction"),
        ({"type": "step", "data": {"message": 3}}, "VALIDATION_ERROR", "InvalidField"),
        ({"type": "reset", "data": {"seed": -1}}, "VALIDATION_ERROR", "InvalidField"),
        ({"type": "step", "data": {"message": "x" * 65}}, "VALIDATION_ERROR", "ActionTooLong"),
        (
            {"type": "step", "data": {"message": "x"}, "pad": "y" * 600},
            "VALIDATION_ERROR",
            "BodyTooLarge",
        ),
        ({"type": "step", "data": {"message": "x"}}, "EXECUTION_ERROR", "ResetNeededError"),
    ],
)
def test_a_bad_frame_gets_an_error_frame_and_the_session_goes_on(server, frame, code, error_type):
    with open_ws(server) as ws:
        error = ask(ws, frame)
        assert error["type"] == "error"
        assert (error["data"]["code"], error["data"]["type"]) == (code, error_type)
        assert error["data"]["message"]
        assert ask(ws, {"type": "reset", "data": {"seed": 0}})["type"] == "observation"


def test_a_step_after_the_episode_ended_is_an_execution_error(server):
    with open_ws(server, OPTIONS) as ws:
        ask(ws, {"type": "reset"})
        assert ask(ws, {"type": "step", "data": {"message": "x"}})["data"]["done"] is True
        error = ask(ws, {"type": "step", "data": {"message": "x"}})
        assert error["data"]["code"] == "EXECUTION_ERROR"
        assert error["data"]["type"] == "EpisodeFinishedError"
        assert error["data"]["status"] == 409


NOT_SERVED = ["game:Wordle-v0", f"remote:http://127.0.0.1:1/{GUESS}"]


@pytest.mark.parametrize("env_id", NOT_SERVED)
def test_an_env_id_that_is_not_served_gets_a_factory_error_and_the_socket_closes(server, env_id):
    with open_ws(server, env_id) as ws:
        error = json.loads(ws.recv(timeout=HANG_GUARD_S))
        assert (error["data"]["code"], error["data"]["type"]) == ("FACTORY_ERROR", "EnvNotAllowed")
        assert env_id in error["data"]["message"]
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=HANG_GUARD_S)
    assert not server.store.sessions


def test_an_unknown_env_id_gets_a_factory_error_naming_close_ids():
    with BackgroundServer(["game:*"]) as srv, open_ws(srv, "game:GuessTheNumbr-v0", None) as ws:
        error = json.loads(ws.recv(timeout=HANG_GUARD_S))
        assert (error["data"]["code"], error["data"]["status"]) == ("FACTORY_ERROR", 404)
        assert GUESS in error["data"]["message"]


@pytest.mark.parametrize("token", [None, "wrong"])
def test_a_handshake_without_the_token_is_refused_with_401(server, token):
    with pytest.raises(InvalidStatus) as refused:
        open_ws(server, token=token)
    assert refused.value.response.status_code == 401
    assert not server.store.sessions


@pytest.mark.parametrize(
    ("limit", "error_type"),
    [
        ({"max_sessions": 1}, "TooManySessions"),
        ({"max_sessions_per_client": 1}, "TooManyClientSessions"),
    ],
)
def test_capacity_reached_when_the_store_is_full_then_a_slot_frees(limit, error_type):
    with BackgroundServer([GUESS], **limit) as srv:
        with open_ws(srv, token=None) as first:
            ask(first, {"type": "reset"})
            with open_ws(srv, token=None) as second:
                error = json.loads(second.recv(timeout=HANG_GUARD_S))
                assert (error["data"]["code"], error["data"]["type"]) == (
                    "CAPACITY_REACHED",
                    error_type,
                )
                with pytest.raises(ConnectionClosed):
                    second.recv(timeout=HANG_GUARD_S)
        assert wait_until(lambda: not srv.store.sessions)
        with open_ws(srv, token=None) as third:
            assert ask(third, {"type": "reset"})["type"] == "observation"


def test_binary_frames_are_read_as_utf8_json(server):
    with open_ws(server) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 0}}).encode())
        assert json.loads(ws.recv(timeout=HANG_GUARD_S))["type"] == "observation"
        ws.send(b"\xff\xfe")
        error = json.loads(ws.recv(timeout=HANG_GUARD_S))
        assert error["data"]["code"] == "INVALID_JSON"


def test_each_frame_counts_against_the_rate_limit():
    frozen = 0.0  # the bucket never refills: the handshake and two frames fit a burst of 3
    with BackgroundServer([GUESS], rate_limit=1.0, rate_burst=3, clock=lambda: frozen) as srv:
        with open_ws(srv, token=None) as ws:
            assert ask(ws, {"type": "reset"})["type"] == "observation"
            assert ask(ws, {"type": "state"})["type"] == "state"
            error = ask(ws, {"type": "state"})
            assert (error["data"]["code"], error["data"]["type"]) == (
                "CAPACITY_REACHED",
                "RateLimited",
            )
            assert error["data"]["retry_after"] >= 1
        with pytest.raises(InvalidStatus) as refused:  # the next handshake too
            open_ws(srv, token=None)
        assert refused.value.response.status_code == 429


def test_a_reaped_session_gets_a_session_error_and_the_socket_closes():
    with BackgroundServer([GUESS], idle_timeout=0.05) as srv, open_ws(srv, token=None) as ws:
        ask(ws, {"type": "reset"})
        assert wait_until(lambda: not srv.store.sessions)
        error = ask(ws, {"type": "state"})
        assert (error["data"]["code"], error["data"]["type"]) == (
            "SESSION_ERROR",
            "SessionNotFound",
        )
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=HANG_GUARD_S)


def test_without_the_denial_extension_a_refused_handshake_is_closed_with_1008():
    app = EnvServer([GUESS], token=TOKEN).app()
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "websocket",
        "path": f"/openenv/{GUESS}/ws",
        "headers": [],
        "client": ("127.0.0.1", 1),
        "extensions": {},
    }

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    assert [(m["type"], m["code"]) for m in sent] == [("websocket.close", 1008)]
    assert "401" in sent[0]["reason"]


# -- HTTP routes ------------------------------------------------------------------------
def test_health_metadata_schema_and_state(server):
    assert http(server, "GET", f"{GUESS}/health") == (200, {"status": "healthy"})
    status, metadata = http(server, "GET", f"{GUESS}/metadata")
    assert status == 200
    assert metadata["name"] == GUESS
    assert metadata["description"] == xpgym.spec(GUESS).description
    status, schema = http(server, "GET", f"{GUESS}/schema")
    assert status == 200
    assert set(schema) == {"action", "observation", "state"}
    assert schema["action"]["required"] == ["message"]
    assert schema["action"]["properties"]["message"]["maxLength"] == 64
    assert http(server, "GET", f"{GUESS}/state") == (
        200,
        {"episode_id": None, "step_count": 0, "env_id": GUESS},
    )


def test_http_reset_answers_the_first_observation_and_keeps_no_session(server):
    status, body = http(server, "POST", f"{GUESS}/reset", {"seed": 4})
    assert status == 200
    assert body["observation"]["text"] == xpgym.make(GUESS).reset(seed=4)[0]
    assert (body["reward"], body["done"]) == (None, False)
    assert not server.store.sessions


def test_http_step_validates_the_action_then_answers_409(server):
    status, body = http(server, "POST", f"{GUESS}/step", {"action": {"message": "hi"}})
    assert (status, body["type"]) == (409, "ResetNeededError")
    status, body = http(server, "POST", f"{GUESS}/step", {"action": {"msg": "hi"}})
    assert (status, body["type"]) == (422, "InvalidAction")


@pytest.mark.parametrize("env_id", NOT_SERVED)
def test_http_routes_refuse_env_ids_that_are_not_served_with_403(server, env_id):
    status, body = http(server, "GET", f"{env_id}/schema")
    assert (status, body["type"]) == (403, "EnvNotAllowed")
    assert env_id in body["detail"]


def test_http_routes_answer_404_for_unknown_env_ids():
    with BackgroundServer(["game:*"]) as srv:
        status, body = http(srv, "GET", "game:GuessTheNumbr-v0/health", token=None)
    assert status == 404
    assert GUESS in body["detail"]


def test_http_routes_need_the_token(server):
    status, _body = http(server, "GET", f"{GUESS}/health", token=None)
    assert status == 401
