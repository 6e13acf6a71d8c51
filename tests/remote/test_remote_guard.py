"""Who gets into the env server and how much: tokens, limits, session isolation.

Against live servers on 127.0.0.1 (`BackgroundServer`). A second client is a connection from
another loopback address (127.0.0.2): the server tells clients apart by remote address.
Requests go through `http.client` directly where the test needs the raw status, headers or
a body that `RemoteEnv` would never send. The rate limit runs on a fake clock (no sleeps).
"""

from __future__ import annotations

import http.client
import json
import logging
import pickle
import threading
import time
import types
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest
from hang_guard import HANG_GUARD_S, wait_until
from starlette.routing import Route

import xpgym
import xpgym.remote.transport
from xpgym.__main__ import main
from xpgym.remote import BackgroundServer, RemoteEnv, RemoteEnvError
from xpgym.remote.guard import RateLimiter, bearer_token_matches, check_bind, is_loopback

GUESS = "game:GuessTheNumber-v0"
TOKEN = "s3cret-token-for-tests-0123456789"
OTHER_CLIENT = "127.0.0.2"
ACTIONS = [r"\boxed{50}", r"\boxed{25}", r"\boxed{75}"]


@dataclass
class Reply:
    status: int
    body: Any
    headers: http.client.HTTPMessage


def call(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str | None = TOKEN,
    source: str = "127.0.0.1",
    raw: bytes | None = None,
    chunked: bool = False,
) -> Reply:
    """One request from `source`; `raw` is sent as the body as is, else `body` as JSON."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(
        parts.hostname, parts.port, timeout=HANG_GUARD_S, source_address=(source, 0)
    )
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        payload = iter([data]) if chunked else data
        conn.request(method, path, body=payload, headers=headers, encode_chunked=chunked)
        response = conn.getresponse()
        content = response.read()
        is_json = response.getheader("Content-Type", "").startswith("application/json")
        body = json.loads(content) if content and is_json else content or None  # SSE: bytes
        return Reply(response.status, body, response.msg)
    finally:
        conn.close()


def create(url: str, env_id: str = GUESS, **kwargs: Any) -> Reply:
    return call(url, "POST", "/sessions", {"env_id": env_id}, **kwargs)


def transcript(env: xpgym.Env, seed: int) -> list:
    return [env.reset(seed=seed), *(env.step(a) for a in ACTIONS)]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(["game:GuessTheNumber-*"], token=TOKEN, max_sessions=32) as srv:
        yield srv


# -- the guard's pieces ---------------------------------------------------------------------
def test_loopback_hosts_are_told_apart_from_the_rest():
    for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.5", "example.org", ""):
        assert not is_loopback(host), host


def test_without_a_token_only_loopback_may_be_bound():
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "a-token")
    for token in (None, ""):
        with pytest.raises(ValueError, match="XPGYM_SERVER_TOKEN") as info:
            check_bind("0.0.0.0", token)
        assert "--host 127.0.0.1" in str(info.value)
    with pytest.raises(ValueError, match="without a token"):
        BackgroundServer(["game:*"], host="0.0.0.0")


def test_bearer_header_parsing():
    assert bearer_token_matches(f"Bearer {TOKEN}".encode(), TOKEN)
    assert bearer_token_matches(f"bearer  {TOKEN} ".encode(), TOKEN)
    for header in (None, b"", TOKEN.encode(), f"Basic {TOKEN}".encode(), b"Bearer wrong"):
        assert not bearer_token_matches(header, TOKEN), header
    assert not bearer_token_matches(f"Bearer {TOKEN}x".encode(), TOKEN)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rate_limiter_refills_at_its_rate_up_to_the_burst():
    clock = FakeClock()
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.acquire("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire("a") == pytest.approx(0.5)  # refused: one token in 1 / rate s
    assert limiter.acquire("b") == 0.0  # per client
    clock.now += 0.5
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("a") > 0  # refused requests took nothing, so one came back
    clock.now += 100.0  # the bucket holds at most `burst`
    assert [limiter.acquire("a") == 0.0 for _ in range(4)] == [True, True, True, False]
    limiter.prune()  # "b" refilled long ago and is forgotten; "a" is empty and kept
    assert set(limiter._buckets) == {"a"}


# -- authentication -------------------------------------------------------------------------
def routes_with_a_session(srv: BackgroundServer, session_id: str) -> list[tuple[str, str]]:
    """(method, path) of every HTTP route the app serves, DELETE last, plus an unknown path
    (the OpenEnv WebSocket route's handshake is tested in test_openenv_server.py)."""
    pairs = [
        (method, route.path.replace("{session_id}", session_id).replace("{env_id:path}", GUESS))
        for route in srv.store.app().routes
        if isinstance(route, Route)
        for method in sorted((route.methods or set()) - {"HEAD"})
    ]
    pairs.sort(key=lambda pair: pair[0] == "DELETE")
    return [*pairs, ("GET", "/no/such/route")]


def test_every_route_answers_401_without_the_token(server, caplog):
    session_id = create(server.url).body["session_id"]
    routes = routes_with_a_session(server, session_id)
    assert len(routes) >= 9
    caplog.set_level(logging.DEBUG, logger="xpgym")
    for method, path in routes:
        for token in (None, "wrong", TOKEN[:-1], TOKEN + "x"):
            reply = call(server.url, method, path, {}, token=token)
            assert reply.status == 401, (method, path, token)
            assert reply.body["error"]["type"] == "Unauthorized"
            assert reply.headers["WWW-Authenticate"] == "Bearer"
        basic = call(server.url, method, path, {}, token=None, raw=b"{}")
        assert basic.status == 401
    assert session_id in server.store.sessions  # the unauthenticated DELETE did nothing
    for method, path in routes:  # the same requests with the token get past the gate
        assert call(server.url, method, path, {}).status != 401, (method, path)
    assert session_id not in server.store.sessions  # the authenticated DELETE (last) did
    assert "refused" in caplog.text
    assert TOKEN[:8] not in caplog.text


def test_the_client_sends_the_token_through_make_and_never_shows_it(server):
    remote_id = f"remote:{server.url}/{GUESS}"
    with xpgym.make(remote_id, token=TOKEN) as env:
        assert transcript(env, 3) == transcript(xpgym.make(GUESS), 3)
        for text in (repr(env), str(env), repr(env.spec), repr(vars(env))):
            assert TOKEN not in text
        copy = pickle.loads(pickle.dumps(env))  # e.g. into a ProcessVectorEnv worker
        with copy:
            assert copy.spec.id == remote_id
            assert copy.reset(seed=1) == xpgym.make(GUESS).reset(seed=1)


def test_the_client_reads_the_token_from_the_environment(server, monkeypatch):
    monkeypatch.setenv("XPGYM_SERVER_TOKEN", TOKEN)
    with xpgym.make(f"remote:{server.url}/{GUESS}") as env:
        assert transcript(env, 0) == transcript(xpgym.make(GUESS), 0)


def test_a_missing_or_wrong_token_is_a_clear_401(server, monkeypatch):
    monkeypatch.delenv("XPGYM_SERVER_TOKEN", raising=False)
    for token in (None, "not-the-token"):
        with pytest.raises(RemoteEnvError, match="bearer token") as info:
            RemoteEnv(server.url, GUESS, token=token).reset(seed=0)
        assert info.value.status == 401
        assert "not-the-token" not in str(info.value)


def test_credentials_in_a_remote_url_are_refused():
    with pytest.raises(ValueError, match="token=") as info:
        xpgym.make(f"remote:http://user:{TOKEN}@127.0.0.1:1/{GUESS}")
    assert TOKEN not in str(info.value)


# -- request validation and body limits -----------------------------------------------------
def test_fields_of_the_wrong_type_are_422_naming_the_field(server):
    session = create(server.url).body["session_id"]
    path = f"/sessions/{session}"
    assert call(server.url, "POST", path + "/reset", {"seed": 0}).status == 200
    cases = [
        ("/step", {"action": 5}, "'action' must be a string"),
        ("/step", {"action": None}, "'action' must be a string, got null"),
        ("/step", {"action": "x", "seq": "1"}, "'seq' must be an integer"),
        ("/reset", {"seed": "0"}, "'seed' must be an integer"),
        ("/reset", {"seed": True}, "'seed' must be an integer"),
        ("/reset", {"options": []}, "'options' must be an object"),
        ("/set_state", {"state": "x"}, "'state' must be an object"),
    ]
    for op, body, message in cases:
        reply = call(server.url, "POST", path + op, body)
        assert (reply.status, reply.body["error"]["type"]) == (422, "InvalidField"), body
        assert message in reply.body["error"]["message"]
    reply = call(server.url, "POST", "/sessions", {"env_id": GUESS, "kwargs": [1]})
    assert reply.status == 422
    assert "'kwargs' must be an object" in reply.body["error"]["message"]
    assert call(server.url, "POST", path + "/step", {"action": r"\boxed{5}"}).status == 200


def test_malformed_bodies_and_lifecycle_errors_keep_their_codes(server):
    assert call(server.url, "POST", "/sessions", raw=b"{not json").status == 400
    assert call(server.url, "POST", "/sessions", [GUESS]).status == 400
    assert call(server.url, "POST", "/sessions", raw=b"[" * 100_000).status == 400  # deep
    assert create(server.url, "game:Wordle-v0").status == 403
    unknown = create(server.url, "game:GuessTheNumber-v9")
    assert (unknown.status, unknown.body["error"]["type"]) == (404, "UnknownEnvError")
    for path, status, name in [
        ("/no/such/route", 404, "NotFound"),
        ("/sessions", 405, "MethodNotAllowed"),
    ]:
        reply = call(server.url, "GET", path)
        assert (reply.status, reply.body["error"]["type"]) == (status, name)
    session = create(server.url).body["session_id"]
    reply = call(server.url, "POST", f"/sessions/{session}/step", {"action": "x", "seq": 1})
    assert (reply.status, reply.body["error"]["type"]) == (409, "ResetNeededError")


def test_oversize_bodies_and_actions_are_413():
    with BackgroundServer(["game:*"], token=TOKEN, max_body_bytes=4096, max_action_chars=64) as srv:
        big = json.dumps({"env_id": GUESS, "kwargs": {"pad": "x" * 100_000}}).encode()
        for chunked in (False, True):  # a declared length, and a streamed body without one
            reply = call(srv.url, "POST", "/sessions", raw=big, chunked=chunked)
            assert (reply.status, reply.body["error"]["type"]) == (413, "BodyTooLarge")
            assert "4096 bytes" in reply.body["error"]["message"]
        with RemoteEnv(srv.url, GUESS, token=TOKEN) as env:
            env.reset(seed=0)
            _, _, _, truncated, info = env.step("y" * 65)
            assert truncated
            assert "ActionTooLong: the action has 65 characters" in info["error"]
            assert "HTTP 413" in info["error"]
            env.reset(seed=0)
            assert env.step("y" * 64)[3] is False  # at the limit is fine
        assert call(srv.url, "GET", "/health").status == 200  # nothing crashed


def test_a_20_mb_action_is_refused_by_the_default_limits(server):
    session = create(server.url).body["session_id"]
    call(server.url, "POST", f"/sessions/{session}/reset", {"seed": 0})
    reply = call(server.url, "POST", f"/sessions/{session}/step", {"action": "z" * 20_000_000})
    assert reply.status == 413
    assert server.store.max_body_bytes == 8 * 2**20


# -- sessions: unguessable, private, limited ------------------------------------------------
def test_session_ids_are_random_uuid4s_and_private_to_their_client(server):
    owner = RemoteEnv(server.url, GUESS, token=TOKEN)
    owner.reset(seed=0)
    other_id = create(server.url).body["session_id"]
    ids = [owner.session_id, other_id]
    assert all(uuid.UUID(hex=i).version == 4 for i in ids)
    assert ids[0] != ids[1]
    own = f"/sessions/{owner.session_id}"
    for method, op, body in [
        ("POST", "/step", {"action": r"\boxed{1}"}),
        ("POST", "/reset", {}),
        ("POST", "/get_state", {}),
        ("DELETE", "", None),
    ]:
        reply = call(server.url, method, own + op, body, source=OTHER_CLIENT)
        if method == "DELETE":
            assert reply.status == 200  # idempotent, and it deleted nothing
        else:
            assert (reply.status, reply.body["error"]["type"]) == (404, "SessionNotFound")
        guessed = call(server.url, method, f"/sessions/{uuid.uuid4().hex}{op}", body)
        assert guessed.status == reply.status
    assert owner.session_id in server.store.sessions
    assert owner.step(r"\boxed{50}")[3] is False  # the owner's episode went on untouched
    owner.close()


def test_a_flood_of_session_creations_gets_429_and_503_while_open_sessions_work():
    with BackgroundServer(
        ["game:*"], token=TOKEN, max_sessions=6, max_sessions_per_client=4, rate_limit=0
    ) as srv:
        envs = [RemoteEnv(srv.url, GUESS, token=TOKEN) for _ in range(2)]
        for env in envs:
            env.reset(seed=7)

        def flood(source: str, n: int = 12) -> Counter:
            """`n` session creations from `source`, released at once; their statuses."""
            start = threading.Barrier(n, timeout=HANG_GUARD_S)

            def one(_: int) -> int:
                start.wait()
                return create(srv.url, source=source).status

            with ThreadPoolExecutor(n) as pool:
                return Counter(pool.map(one, range(n)))

        assert flood("127.0.0.1") == Counter({200: 2, 429: 10})  # its own cap of 4
        assert flood(OTHER_CLIENT) == Counter({200: 2, 503: 10})  # the server's cap of 6
        assert len(srv.store.sessions) == 6
        local = xpgym.make(GUESS)
        local.reset(seed=7)
        for action in ACTIONS:  # the sessions opened before the flood still step
            want = local.step(action)
            assert [env.step(action) for env in envs] == [want, want]
        for env in envs:
            env.close()
        assert wait_until(lambda: len(srv.store.sessions) == 4)
        assert create(srv.url).status == 200  # freed slots can be used again


# -- rate limit -----------------------------------------------------------------------------
def test_the_rate_limit_answers_429_with_retry_after_per_client():
    clock = FakeClock()
    with BackgroundServer(
        ["game:*"], token=TOKEN, rate_limit=0.25, rate_burst=3, clock=clock
    ) as srv:
        assert [call(srv.url, "GET", "/health").status for _ in range(3)] == [200] * 3
        refused = call(srv.url, "GET", "/health")
        assert (refused.status, refused.body["error"]["type"]) == (429, "RateLimited")
        assert refused.headers["Retry-After"] == "4"  # 1 request / 0.25 per s
        assert call(srv.url, "GET", "/health", source=OTHER_CLIENT).status == 200
        assert call(srv.url, "GET", "/health", token=None).status == 401  # checked first
        clock.now += 2.0
        refused = call(srv.url, "GET", "/health")
        assert (refused.status, refused.headers["Retry-After"]) == (429, "2")
        clock.now += 2.0
        assert call(srv.url, "GET", "/health").status == 200
        assert call(srv.url, "GET", "/health").status == 429


def _sleeps_on(clock: FakeClock | None, monkeypatch) -> list[float]:
    """Make `RemoteEnv` sleep on a fake clock (advanced by each sleep, if given); the waits."""
    waits: list[float] = []

    def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        if clock is not None:
            clock.now += seconds

    fake_time = types.SimpleNamespace(sleep=fake_sleep, monotonic=time.monotonic)
    monkeypatch.setattr(xpgym.remote.transport, "time", fake_time)
    return waits


def test_the_client_waits_out_the_rate_limit_instead_of_failing(monkeypatch):
    """`RemoteEnv` sleeps ``Retry-After`` (times a jitter in [1, 1.5)) and sends again."""
    clock = FakeClock()
    waits = _sleeps_on(clock, monkeypatch)
    with BackgroundServer(["game:*"], rate_limit=0.5, rate_burst=1, clock=clock) as srv:
        with RemoteEnv(srv.url, GUESS, max_retries=0) as env:  # re-sends are not retries
            assert transcript(env, 5) == transcript(xpgym.make(GUESS), 5)
        # the create took the burst; the reset, 3 steps and the closing DELETE waited once each
        assert len(waits) == 5
        assert all(2.0 <= wait < 3.0 for wait in waits)
        assert len(set(waits)) > 1  # jittered: clients refused together come back apart


def test_the_client_gives_up_once_its_waits_would_pass_its_timeout(monkeypatch):
    clock = FakeClock()  # never advanced by the client's sleeps: the server refuses forever
    waits = _sleeps_on(None, monkeypatch)
    with BackgroundServer(["game:*"], rate_limit=0.5, rate_burst=1, clock=clock) as srv:
        with RemoteEnv(srv.url, GUESS, timeout=5.0) as env:
            with pytest.raises(RemoteEnvError, match="RateLimited") as info:
                env.reset(seed=0)  # the create took the burst
            assert info.value.status == 429
            assert 1 <= len(waits) <= 2
            assert sum(waits[:-1]) + 2.0 <= 5.0  # each wait began within the budget
        with RemoteEnv(srv.url, GUESS, timeout=1.0) as hasty:  # Retry-After 2 s > 1 s
            waits.clear()
            with pytest.raises(RemoteEnvError, match="RateLimited"):
                hasty.reset(seed=0)
            assert waits == []


@pytest.mark.parametrize(
    ("status", "header", "wait"),
    [(429, "2", 2.0), (503, "1.5", 1.5), (429, None, None), (503, None, None), (500, "1", None)],
)
def test_only_a_429_or_503_with_retry_after_is_sent_again(status, header, wait):
    assert xpgym.remote.transport._retry_after(status, header) == wait


# -- the serve command ----------------------------------------------------------------------
def test_serve_refuses_a_public_host_without_a_token(monkeypatch, capsys):
    monkeypatch.delenv("XPGYM_SERVER_TOKEN", raising=False)
    assert main(["serve", "--env", "game:*", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "XPGYM_SERVER_TOKEN" in err
    assert "--host 127.0.0.1" in err


def test_serve_passes_the_token_and_limits_to_the_server(monkeypatch, capsys):
    import xpgym.remote.server

    seen: dict[str, Any] = {}
    monkeypatch.setattr(xpgym.remote.server, "serve", lambda envs, **kw: seen.update(kw))
    monkeypatch.setenv("XPGYM_SERVER_TOKEN", TOKEN)
    argv = ["serve", "--env", "game:*", "--host", "0.0.0.0", "--rate-limit", "5"]
    argv += ["--max-sessions-per-client", "3", "--max-body-bytes", "100"]
    assert main(argv) == 0
    assert seen["token"] == TOKEN
    assert (seen["rate_limit"], seen["max_sessions_per_client"]) == (5.0, 3)
    assert seen["max_body_bytes"] == 100
    assert TOKEN not in capsys.readouterr().err
