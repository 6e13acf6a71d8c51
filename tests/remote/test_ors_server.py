"""The ORS front end (`xpgym.remote.ors_server`) against ORS's own client, unchanged.

``ors.client.ORS`` (ors-sdk, the `interop` extra) plays whole episodes against a
`BackgroundServer` on 127.0.0.1, checked step by step against the same episodes through
`xpgym.make` (same seed, same actions). Raw HTTP covers each error path and the server-sent
events. `test:OrsGate-v0` is a `toy_envs.ToyEnv` whose action ``"wait"`` blocks until the
test opens `GATE`: the tests see a call in flight by events, never by time.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from hang_guard import HANG_GUARD_S, wait_until
from toy_envs import ToyEnv

import xpgym
from xpgym.core import registry
from xpgym.remote import BackgroundServer, RemoteEnv, ors_server
from xpgym.remote.ors_server import ACTION_TOOL, CHUNK_CHARS, MAX_TASK_RANGE, SPLITS

ors_client = pytest.importorskip("ors.client", reason="ors-sdk is the `interop` extra")

TOKEN = "ors-test-token"
GUESS = "game:GuessTheNumber-v0"
TOOLGYM = "toolgym:ClosestToK-v0-easy"
ACTIONS_ENV = "world:GridWorld-v0-actions"
GATED = "test:OrsGate-v0"
VISION = "vision:CountShapes-v0"
PATTERNS = [
    "game:GuessTheNumber-*",
    "toolgym:ClosestToK-*",
    "world:GridWorld-*",
    "vision:CountShapes-*",
    "test:Ors*",
]
MAX_ACTION_CHARS = 4 * CHUNK_CHARS
GATE = threading.Event()


class GateEnv(ToyEnv):
    """`ToyEnv` whose action ``"wait"`` blocks until `GATE` opens (then steps ``"0"``)."""

    def step(self, action: str):
        if action == "wait":
            assert GATE.wait(HANG_GUARD_S), "the test never opened GATE"
            action = "0"
        return super().step(action)


@pytest.fixture(scope="module", autouse=True)
def _gate_registered() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "registry", dict(registry.registry))  # no id left behind
        xpgym.register(GATED, GateEnv, episode_length=3)
        yield


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(
        PATTERNS, token=TOKEN, max_sessions=16, max_action_chars=MAX_ACTION_CHARS
    ) as srv:
        yield srv


@pytest.fixture
def client(server: BackgroundServer) -> Iterator[Any]:
    with ors_client.ORS(server.url, api_key=TOKEN) as ors:
        yield ors


def request(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    sid: str | None = None,
    headers: dict[str, str] | None = None,
    source: str = "127.0.0.1",
) -> tuple[int, Any]:
    """One request with the ORS key; returns (status, JSON body or the raw SSE text)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(
        parts.hostname, parts.port, timeout=HANG_GUARD_S, source_address=(source, 0)
    )
    sent = {"X-API-Key": TOKEN, "Content-Type": "application/json"}
    if sid is not None:
        sent["X-Session-ID"] = sid
    sent.update(headers or {})
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, urllib.parse.quote(path, safe="/:"), body=data, headers=sent)
        response = conn.getresponse()
        content = response.read().decode()
        if response.getheader("Content-Type", "").startswith("application/json"):
            return response.status, json.loads(content)
        return response.status, content
    finally:
        conn.close()


def sse_events(text: str) -> list[tuple[str, str]]:
    """(event, data) pairs of a stream, read as ors-sdk reads them (data left-stripped)."""
    events, name, data = [], None, []
    for line in text.split("\n"):
        if not line:
            if name:
                events.append((name, "\n".join(data)))
            name, data = None, []
        elif not line.startswith(":"):
            field, value = line.split(":", 1)
            if field == "event":
                name = value.lstrip()
            elif field == "data":
                data.append(value.lstrip())
    return events


def call_result(text: str) -> dict[str, Any]:
    """The JSON result of a ``/call`` stream: its ``chunk`` and ``end`` data joined."""
    events = sse_events(text)
    assert events[-1][0] == "end", events
    return json.loads("".join(data for name, data in events if name in ("chunk", "end")))


def open_session(srv: BackgroundServer, env_id: str = GUESS, seed: int = 0, **kw: Any) -> str:
    status, stream = request(srv.url, "POST", "/create_session", **kw)
    assert status == 200
    (name, sid), (end, _) = sse_events(stream)
    assert (name, end) == ("task_id", "end")
    body = {"env_name": env_id, "task_spec": {"seed": seed}}
    assert request(srv.url, "POST", "/create", body, sid=sid, **kw) == (200, {"sid": sid})
    return sid


def jsonable(value: Any) -> Any:
    """`value` as it crosses JSON, without the ``duration_s`` timings (they differ per run)."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items() if k != "duration_s"}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def guess_from(observation: str, bounds: list[int]) -> str:
    """Binary search on GuessTheNumber's feedback; `bounds` is [low, high], updated."""
    if "higher than" in observation:
        bounds[0] = int(observation.split("higher than ")[1].split(".")[0]) + 1
    elif "lower than" in observation:
        bounds[1] = int(observation.split("lower than ")[1].split(".")[0]) - 1
    return f"\\boxed{{{(bounds[0] + bounds[1]) // 2}}}"


def assert_same_step(output: Any, expected: tuple) -> None:
    """An ORS tool output equals an `Env.step` result (terminated/truncated in metadata)."""
    obs, reward, terminated, truncated, info = expected
    assert [block.text for block in output.blocks] == [obs]
    assert output.reward == reward
    assert output.finished == (terminated or truncated)
    assert jsonable(output.metadata) == {
        "terminated": terminated,
        "truncated": truncated,
        "info": jsonable(info),
    }


# -- discovery ---------------------------------------------------------------------------


def test_list_environments_lists_the_registered_ids_the_globs_allow(server):
    status, names = request(server.url, "GET", "/list_environments")
    assert status == 200
    assert names == sorted({i for p in PATTERNS for i in xpgym.list_envs(p)})
    assert GUESS in names
    assert TOOLGYM in names
    assert GATED in names
    assert not any(name.startswith("math:") for name in names)


def test_splits_name_seed_ranges_and_a_task_is_a_seed(client):
    env = client.environment(GUESS)
    assert env.list_splits() == ["train", "validation", "test"]
    assert env.num_tasks("validation") == len(SPLITS["validation"]) == 10**9
    assert env.get_task("test", 3).task_spec == {"seed": 2 * 10**9 + 3}
    assert env.get_task("train", -1).task_spec == {"seed": 10**9 - 1}
    tasks = env.get_task_range("validation", 5, 8)
    assert [t.task_spec for t in tasks] == [{"seed": 10**9 + i} for i in (5, 6, 7)]
    assert {t.environment_name for t in tasks} == {GUESS}


def test_task_errors_are_400_with_ors_detail(server):
    url = server.url
    status, body = request(url, "POST", f"/{GUESS}/tasks", {"split": "train"})
    assert status == 400  # a billion tasks: the index-based API instead
    assert "num_tasks" in body["detail"]
    assert request(url, "POST", f"/{GUESS}/num_tasks", {"split": "dev"})[0] == 400
    status, body = request(url, "POST", f"/{GUESS}/task", {"split": "test", "index": 10**9})
    assert status == 400
    assert "Invalid index" in body["detail"]
    status, body = request(url, "POST", f"/{GUESS}/task_range", {"split": "test"})
    assert status == 400
    assert f"over {MAX_TASK_RANGE}" in body["detail"]
    status, body = request(url, "POST", f"/{GUESS}/task", {"split": "test", "index": "1"})
    assert status == 422
    assert "'index'" in body["detail"]


def test_a_text_env_has_one_action_tool_taking_the_models_text(client):
    (tool,) = client.environment(GUESS).list_tools()
    assert tool.name == ACTION_TOOL
    assert tool.input_schema["required"] == ["text"]
    assert tool.input_schema["properties"]["text"]["type"] == "string"


def test_a_tool_env_lists_its_tools_with_their_schemas_then_the_action_tool(client):
    _, info = xpgym.make(TOOLGYM).reset(seed=0)
    schemas = [schema["function"] for schema in info["tools"]]
    tools = client.environment(TOOLGYM).list_tools()
    assert [t.name for t in tools] == [s["name"] for s in schemas] + [ACTION_TOOL]
    for tool, schema in zip(tools, schemas, strict=False):
        assert (tool.description, tool.input_schema) == (
            schema["description"],
            schema["parameters"],
        )
    with client.environment(TOOLGYM).session(split="train", index=0) as session:
        assert [t.name for t in session.list_tools()] == [t.name for t in tools]


# -- whole episodes through the ORS client -----------------------------------------------


def test_a_game_episode_through_ors_matches_xpgym_make(client):
    env = xpgym.make(GUESS)
    seed = SPLITS["test"][7]
    obs, _ = env.reset(seed=seed)
    with client.environment(GUESS).session(split="test", index=7) as session:
        assert [block.text for block in session.get_prompt()] == [obs]
        bounds, finished, turns = [1, 20], False, 0
        while not finished:
            action = guess_from(obs, bounds)
            output = session.call_tool(ACTION_TOOL, {"text": action})
            expected = env.step(action)
            assert_same_step(output, expected)
            obs, finished, turns = expected[0], output.finished, turns + 1
        assert output.metadata["terminated"]
        assert output.reward > 0
        assert 1 < turns <= 7
        with pytest.raises(ors_client.ToolCallError, match="episode is over"):
            session.call_tool(ACTION_TOOL, {"text": "\\boxed{1}"})


def test_concurrent_ors_clients_each_play_their_own_episode(server):
    def play(index: int) -> list[str]:
        with (
            ors_client.ORS(server.url, api_key=TOKEN) as ors,
            ors.environment(GUESS).session(split="train", index=index) as session,
        ):
            texts, bounds, finished = [session.get_prompt()[0].text], [1, 20], False
            while not finished:
                output = session.call_tool(ACTION_TOOL, {"text": guess_from(texts[-1], bounds)})
                texts.append(output.blocks[0].text)
                finished = output.finished
        return texts

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        played = list(pool.map(play, range(4)))
    for index, texts in enumerate(played):
        env = xpgym.make(GUESS)
        expected, bounds, finished = [env.reset(seed=SPLITS["train"][index])[0]], [1, 20], False
        while not finished:
            obs, _, terminated, truncated, _ = env.step(guess_from(expected[-1], bounds))
            expected.append(obs)
            finished = terminated or truncated
        assert texts == expected
    assert len({tuple(texts) for texts in played}) > 1  # the seeds made different episodes


def test_a_toolgym_episode_through_ors_matches_xpgym_make(client):
    seed = SPLITS["train"][11]
    oracle = xpgym.make(TOOLGYM)
    oracle.reset(seed=seed)
    actions = [json.loads(action) for action in oracle.solve()]
    env = xpgym.make(TOOLGYM)
    obs, _ = env.reset(seed=seed)
    ors_env = client.environment(TOOLGYM)
    with ors_env.session(task=ors_env.get_task("train", 11)) as session:
        assert [block.text for block in session.get_prompt()] == [obs]
        for action in actions:  # the model's JSON call, and the same call as an ORS tool
            output = session.call_tool(action["name"], action["parameters"])
            assert_same_step(output, env.step(json.dumps(action)))
        assert actions[-1]["name"] == "Done"
        assert output.finished
        assert output.metadata["terminated"]
        assert output.reward == 1.0
        assert output.metadata["info"]["correct"] is True


def test_a_tool_wrapper_env_runs_its_tool_and_takes_answers_through_respond(client):
    env = xpgym.make(ACTIONS_ENV)
    obs, _ = env.reset(seed=SPLITS["test"][2])
    with client.environment(ACTIONS_ENV).session(split="test", index=2) as session:
        assert [block.text for block in session.get_prompt()] == [obs]
        output = session.call_tool("available_actions", {})
        call = '<tool_call>{"name": "available_actions", "arguments": {}}</tool_call>'
        assert_same_step(output, env.step(call))
        assert output.metadata["info"]["tool_calls_total"] == 1
        move = f"\\boxed{{{json.loads(output.blocks[0].text)[0]}}}"
        assert_same_step(session.call_tool(ACTION_TOOL, {"text": move}), env.step(move))


def test_a_task_spec_written_by_the_client_passes_seed_and_reset_options(client):
    task = "ClosestToK@" + json.dumps({"k": 5, "numbers": [1, 4, 9]}, separators=(",", ":"))
    expected, _ = xpgym.make(TOOLGYM).reset(seed=3, options={"task": task})
    spec = ors_client.Task(TOOLGYM, {"seed": 3, "options": {"task": task}})
    with client.environment(TOOLGYM).session(task=spec) as session:
        assert session.get_prompt()[0].text == expected
        assert session.call_tool("Done", {"answer": 4}).reward == 1.0


def test_a_vision_envs_images_are_image_blocks(client):
    obs, info = xpgym.make(VISION).reset(seed=SPLITS["validation"][4])
    with client.environment(VISION).session(split="validation", index=4) as session:
        text, image = session.get_prompt()
    assert text.text == obs
    assert (image.mimeType, f"data:image/png;base64,{image.data}") == ("image/png", *info["images"])


def test_the_native_protocol_still_works_on_the_same_server(server):
    with RemoteEnv(server.url, GUESS, token=TOKEN) as remote:
        direct = xpgym.make(GUESS)
        assert remote.reset(seed=4) == direct.reset(seed=4)
        assert remote.step("\\boxed{9}") == direct.step("\\boxed{9}")
    status, health = request(server.url, "GET", "/health")  # X-API-Key gets in here too
    assert status == 200
    assert health["status"] == "ok"


# -- errors -------------------------------------------------------------------------------


def test_unknown_and_not_allowed_envs_are_404_and_403(server):
    status, body = request(server.url, "GET", "/toolgym:ClosestToK-v9/splits")
    assert status == 404
    assert "toolgym:ClosestToK-v9" in body["detail"]
    status, body = request(server.url, "GET", "/math:Arithmetic-v0/tools")
    assert status == 403
    assert "not served here" in body["detail"]
    _, stream = request(server.url, "POST", "/create_session")
    sid = sse_events(stream)[0][1]
    create = {"env_name": "math:Arithmetic-v0", "task_spec": {"seed": 0}}
    assert request(server.url, "POST", "/create", create, sid=sid)[0] == 403
    create["env_name"] = "toolgym:ClosestToK-v9"
    assert request(server.url, "POST", "/create", create, sid=sid)[0] == 404


def test_a_session_made_without_env_name_gets_its_env_from_its_first_env_path(server):
    _, stream = request(server.url, "POST", "/create_session")
    sid = sse_events(stream)[0][1]
    body = {"split": "test", "index": 0}
    assert request(server.url, "POST", "/create", body, sid=sid) == (200, {"sid": sid})
    status, reply = request(server.url, "GET", "/math:Arithmetic-v0/prompt", sid=sid)
    assert status == 403  # the build's error comes back from the first env request
    status, blocks = request(server.url, "GET", f"/{GUESS}/prompt", sid=sid)
    assert status == 200
    assert blocks[0]["text"] == xpgym.make(GUESS).reset(seed=SPLITS["test"][0])[0]
    status, reply = request(server.url, "GET", f"/{TOOLGYM}/prompt", sid=sid)
    assert status == 409
    assert GUESS in reply["detail"]
    request(server.url, "POST", "/delete", sid=sid)


def test_a_missing_or_wrong_key_is_401_and_the_right_one_gets_in(server):
    for headers in ({"X-API-Key": "wrong"}, {"X-API-Key": ""}, {"X-API-Key": TOKEN + "x"}):
        status, body = request(server.url, "GET", f"/{GUESS}/splits", headers=headers)
        assert status == 401
        assert "missing or wrong bearer token" in body["detail"]  # readable by ORS clients
    assert request(server.url, "GET", f"/{GUESS}/splits")[0] == 200
    bearer = {"X-API-Key": "", "Authorization": f"Bearer {TOKEN}"}
    assert request(server.url, "GET", f"/{GUESS}/splits", headers=bearer)[0] == 200
    with (
        ors_client.ORS(server.url, api_key="wrong") as ors,
        pytest.raises(ors_client.AuthenticationError),
    ):
        ors.environment(GUESS).list_splits()


def test_unknown_sessions_are_404_and_a_session_is_its_creators(server):
    for method, path in (("POST", "/ping"), ("GET", f"/{GUESS}/prompt")):
        status, body = request(server.url, method, path, sid="no-such-session")
        assert status == 404
        assert "no session 'no-such-session'" in body["detail"]
        assert request(server.url, method, path)[0] == 400  # no X-Session-ID at all
    sid = open_session(server)
    assert request(server.url, "POST", "/ping", sid=sid, source="127.0.0.2")[0] == 404
    assert request(server.url, "POST", "/delete", sid=sid, source="127.0.0.2")[0] == 200
    assert request(server.url, "POST", "/ping", sid=sid) == (200, {"status": "ok"})
    assert request(server.url, "POST", "/create", {"split": "test", "index": 1}, sid=sid)[0] == 400
    assert request(server.url, "POST", "/delete", sid=sid) == (200, {"sid": sid})
    assert request(server.url, "POST", "/ping", sid=sid)[0] == 404
    assert wait_until(lambda: not any(s.env_id == GUESS for s in server.store.sessions.values()))


def test_idle_sessions_expire_with_the_stores_reaping():
    with BackgroundServer(PATTERNS, idle_timeout=0.3) as srv:
        sid = open_session(srv)
        assert wait_until(lambda: not srv.store.sessions)  # the store's reaper closed it
        status, body = request(srv.url, "GET", f"/{GUESS}/prompt", sid=sid)
        assert status == 404
        assert "0.3 s idle" in body["detail"]
        _, stream = request(srv.url, "POST", "/create_session")
        waiting = sse_events(stream)[0][1]  # created, but no env yet
        assert request(srv.url, "POST", "/create", {"split": "test", "index": 0}, sid=waiting)
        time.sleep(0.6)  # past idle_timeout without a request (the condition under test)
        assert request(srv.url, "POST", "/ping", sid=waiting)[0] == 404


def test_ors_sessions_are_held_to_the_stores_session_limit():
    with BackgroundServer(PATTERNS, max_sessions=1) as srv:
        first = open_session(srv)
        _, stream = request(srv.url, "POST", "/create_session")
        second = sse_events(stream)[0][1]
        body = {"env_name": GUESS, "task_spec": {"seed": 1}}
        status, reply = request(srv.url, "POST", "/create", body, sid=second)
        assert status == 503
        assert "maximum of 1 sessions" in reply["detail"]
        request(srv.url, "POST", "/delete", sid=first)
        assert wait_until(lambda: not srv.store.sessions)
        assert request(srv.url, "POST", "/create", body, sid=second) == (200, {"sid": second})


def test_bad_tool_names_and_arguments_are_ok_false_results(server):
    sid = open_session(server, TOOLGYM)
    path = f"/{TOOLGYM}/call"
    for call, error in (
        ({"name": "Nope", "input": {}}, "'Nope' is not a valid tool"),
        ({"name": "LookUp", "input": {"index": "3"}}, "argument 'index': expected integer"),
        ({"name": "LookUp", "input": {}}, "missing required argument 'index'"),
        ({"name": ACTION_TOOL, "input": {"txt": "hi"}}, "missing required argument 'text'"),
    ):
        status, stream = request(server.url, "POST", path, call, sid=sid)
        assert status == 200
        result = call_result(stream)
        assert result["ok"] is False
        assert error in result["error"]
    ok = call_result(
        request(server.url, "POST", path, {"name": "Observe", "input": {}}, sid=sid)[1]
    )
    assert ok["ok"]
    assert ok["output"]["metadata"]["info"]["tool_calls"] == 1
    for body in ({"input": {}}, {"name": "Observe", "input": []}, {"name": "Observe"}):
        status, reply = request(server.url, "POST", path, body, sid=sid)
        assert status == 422
        assert "detail" in reply
    request(server.url, "POST", "/delete", sid=sid)


def test_an_env_exception_is_an_sse_error_event_and_a_long_action_is_413(server, client):
    with (
        client.environment(GATED).session(split="train", index=0) as session,
        pytest.raises(RuntimeError, match="RuntimeError: toy failure"),
    ):
        session.call_tool(ACTION_TOOL, {"text": "raise"})
    sid = open_session(server, GATED)
    too_long = {"name": ACTION_TOOL, "input": {"text": "x" * (MAX_ACTION_CHARS + 1)}}
    status, body = request(server.url, "POST", f"/{GATED}/call", too_long, sid=sid)
    assert status == 413
    assert "max-action-chars" in body["detail"]
    request(server.url, "POST", "/delete", sid=sid)


# -- the event stream ---------------------------------------------------------------------


def test_a_long_result_arrives_in_chunks_with_its_spaces_intact(client):
    text = " " * (CHUNK_CHARS + 7) + "y " * CHUNK_CHARS  # spaces at every chunk boundary
    assert len(text) < MAX_ACTION_CHARS
    with client.environment(GATED).session(split="train", index=0) as session:
        output = session.call_tool(ACTION_TOOL, {"text": text})
    assert output.blocks[0].text == f"turn=1 last={text}"


def test_a_call_in_flight_sends_pings_and_a_dropped_stream_resumes_by_task_id(server, monkeypatch):
    monkeypatch.setattr(ors_server, "PING_SECONDS", 0.01)
    GATE.clear()
    sid = open_session(server, GATED)
    parts = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=HANG_GUARD_S)
    headers = {"X-API-Key": TOKEN, "X-Session-ID": sid, "Content-Type": "application/json"}
    body = json.dumps({"name": ACTION_TOOL, "input": {"text": "wait"}})
    conn.request("POST", f"/{GATED}/call", body=body, headers=headers)
    response = conn.getresponse()
    assert response.readline() == b"event: task_id\n"
    task_id = response.readline().decode().removeprefix("data: ").strip()
    assert response.readline() == b"\n"
    assert response.readline() == b": ping\n"  # the env is blocked: keep-alives only
    conn.close()  # the stream drops while the env works
    GATE.set()
    resumed = {"name": ACTION_TOOL, "input": {"text": "wait"}, "task_id": task_id}
    _, stream = request(server.url, "POST", f"/{GATED}/call", resumed, sid=sid)
    assert sse_events(stream)[0] == ("task_id", task_id)
    assert call_result(stream)["output"]["blocks"][0]["text"] == "turn=1 last=0"
    again = {"name": ACTION_TOOL, "input": {"text": "5"}}
    _, stream = request(server.url, "POST", f"/{GATED}/call", again, sid=sid)
    assert call_result(stream)["output"]["blocks"][0]["text"] == "turn=2 last=5"  # one step
    unknown = {**again, "task_id": "no-such-task"}
    _, stream = request(server.url, "POST", f"/{GATED}/call", unknown, sid=sid)
    assert sse_events(stream) == [("error", "unknown task_id")]
    request(server.url, "POST", "/delete", sid=sid)
