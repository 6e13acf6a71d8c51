"""HTTP/JSON server that hosts xpgym envs in sessions (``python -m xpgym serve``).

Access (see `xpgym.remote.guard`): with a ``token``, every route (``/health`` too, and
unknown paths) answers 401 unless the request carries ``Authorization: Bearer <token>``;
without one the server only binds to loopback. Every request that passed the token check
is then held to its client's rate limit (429 with ``Retry-After``) and the body size limit
(413). A client is the request's remote address; its sessions are its own: another client
gets 404 for them, as for an id that never existed (ids are random uuid4s, 122 bits).

Protocol (all bodies are JSON; every error body is
``{"error": {"type": "<ExceptionType>", "message": "...", "traceback": "..."}}``):

==========================================  =============================================
Request                                     Response
==========================================  =============================================
``GET /health``                             ``{status, sessions, max_sessions,
                                            idle_timeout, env_patterns, auth, limits}``
``POST /sessions {env_id, kwargs}``         ``{session_id, env_id, metadata,
                                            keep_alive}``; 403 if `env_id` does not match
                                            ``--env``, 404 unknown id, 400 bad kwargs,
                                            429 when the client holds
                                            ``max_sessions_per_client``, 503 when
                                            ``max_sessions`` are open
``POST /sessions/{id}/reset {seed, options}``  ``{observation, info}``
``POST /sessions/{id}/step {action, seq}``  ``{observation, reward, terminated,
                                            truncated, info}``
``POST /sessions/{id}/sample_random_action``  ``{action}``
``POST /sessions/{id}/get_state``           ``{state}``
``POST /sessions/{id}/set_state {state}``   ``{}``
``DELETE /sessions/{id}``                   ``{}`` (also for an unknown id: idempotent)
==========================================  =============================================

Status codes: 400 body is not a JSON object, or bad env kwargs; 401 missing or wrong bearer
token; 403 env id not allowed; 404 unknown env id or session (never created, another
client's, deleted, or reaped after ``idle_timeout`` seconds without a request); 409
lifecycle errors (`ResetNeededError`, `EpisodeFinishedError`, a step ``seq`` out of order);
413 body over ``max_body_bytes`` (``BodyTooLarge``) or action over ``max_action_chars``
(``ActionTooLong``); 422 a field of the wrong JSON type (``InvalidField``, the message names
the field: ``action`` must be a string, ``seed`` and ``seq`` integers, ``options``,
``kwargs`` and ``state`` objects, ``env_id`` a string); 429 rate limit (``RateLimited``, with
``Retry-After`` in whole seconds) or the client's session limit (``TooManyClientSessions``);
500 any other exception raised by the env; 503 the server's session limit
(``TooManySessions``).

Semantics:

* Each session owns one env. Calls to one session run one at a time, in arrival order; calls
  to different sessions run concurrently on a thread pool (``threads`` workers), so an env
  that blocks (sleeps, waits on I/O) never blocks the server or other sessions.
* ``step`` carries ``seq``, the client's count of steps in this session (1, 2, ...). A step
  whose ``seq`` equals the last completed one returns that step's cached response instead
  of stepping again, so a client may retry a step after a dropped connection without
  stepping twice. Omit ``seq`` to step unconditionally.
* Sessions idle for more than ``idle_timeout`` seconds are closed by a reaper that runs
  every ``min(1, idle_timeout / 4)`` seconds; a session with a call in flight is never idle.
* JSON encoding: observations, infos and metadata cross as JSON. NumPy scalars and arrays
  become numbers and lists, tuples and sets become lists; any other value that JSON cannot
  hold (objects, bytes) becomes its ``repr()`` string. States from ``get_state`` are encoded
  strictly: a state that JSON cannot hold exactly is a 500 error (`TypeError`), never a
  silent ``repr``; tuples in a state come back as lists.
* ``remote:`` ids are never served (no proxy chains), whatever ``--env`` allows.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fnmatch
import http
import json
import logging
import math
import socket
import threading
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from xpgym.core.env import Env, EpisodeFinishedError, ResetNeededError
from xpgym.core.registry import UnknownEnvError, make
from xpgym.remote.guard import (
    MAX_ACTION_CHARS,
    MAX_BODY_BYTES,
    RATE_LIMIT,
    RateLimiter,
    bearer_token_matches,
    check_bind,
)

__all__ = ["BackgroundServer", "EnvServer", "create_app", "serve", "to_json"]

logger = logging.getLogger(__name__)


class _HTTPError(Exception):
    """An error with an HTTP status, turned into a JSON error body."""

    def __init__(
        self,
        status: int,
        type_name: str,
        message: str,
        tb: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type_name = type_name
        self.message = message
        self.tb = tb
        self.headers = headers


def _lenient(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return repr(value)


def _strict(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} value {value!r:.80} cannot be sent as JSON")


def to_json(value: Any, *, strict: bool = False) -> bytes:
    """Encode `value` as UTF-8 JSON (see the module docstring for what cannot cross).

    Args:
        value: Any value; dict keys that are not str/int/float/bool/None raise `TypeError`.
        strict: Raise `TypeError` on values JSON cannot hold instead of sending their repr.
    """
    return json.dumps(value, default=_strict if strict else _lenient).encode()


def _error_from(exc: BaseException) -> _HTTPError:
    if isinstance(exc, _HTTPError):
        return exc
    if isinstance(exc, (ResetNeededError, EpisodeFinishedError)):
        status = 409
    elif isinstance(exc, UnknownEnvError):
        status = 404
    else:
        status = 500
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return _HTTPError(status, type(exc).__name__, str(exc), tb)


_JSON_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "an array",
    dict: "an object",
    type(None): "null",
}


def _field(body: dict[str, Any], name: str, kind: type, *, required: bool = False) -> Any:
    """``body[name]`` if it has JSON type `kind` (or is absent/null and not `required`).

    Raises:
        _HTTPError: 422 ``InvalidField`` naming the field, the expected and the sent type.
    """
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = _JSON_TYPE_NAMES[kind] + ("" if required else " or null")
        sent = _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
        raise _HTTPError(422, "InvalidField", f"field {name!r} must be {expected}, got {sent}")
    return value


def _client_of(scope: Scope) -> str:
    """The client a request counts against: its remote address (see `xpgym.remote.guard`)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


@dataclass(eq=False)
class _Session:
    id: str
    env_id: str
    env: Env
    owner: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    last_used: float = field(default_factory=time.monotonic)
    in_flight: int = 0
    closed: bool = False
    steps_done: int = 0
    last_step: bytes | None = None


class EnvServer:
    """The session store and request handlers behind `create_app`.

    Args:
        env_patterns: Globs over env ids that clients may create (``"game:*"``, ``"*"``).
        max_sessions: Open sessions allowed at once; further creates get 503.
        idle_timeout: Seconds without a request after which a session is closed.
        threads: Worker threads for env calls (default: `max_sessions`, so every session
            can block in its env at the same time).
        keep_alive: Seconds the HTTP server keeps an idle connection open (sent to clients,
            which reconnect before it expires).
        token: Bearer token every request must carry (``None``: no authentication; then
            `serve` and `BackgroundServer` bind to loopback only). Never logged.
        max_body_bytes: Largest request body in bytes (413 ``BodyTooLarge``). Leave room
            for JSON escaping above `max_action_chars`.
        max_action_chars: Longest step action in characters (413 ``ActionTooLong``).
        max_sessions_per_client: Open sessions one client may hold (429
            ``TooManyClientSessions``; default `max_sessions`: one client, e.g. one trainer,
            may use the whole server; set it lower when clients share a server).
        rate_limit: Requests per second one client may make on average (429
            ``RateLimited`` with ``Retry-After``); 0 turns the rate limit off.
        rate_burst: Requests one client may make at once (default ``2 * rate_limit``).
        clock: Monotonic clock of the rate limiter (tests inject a fake one).
    """

    def __init__(
        self,
        env_patterns: Sequence[str],
        *,
        max_sessions: int = 256,
        idle_timeout: float = 300.0,
        threads: int | None = None,
        keep_alive: float = 75.0,
        token: str | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_action_chars: int = MAX_ACTION_CHARS,
        max_sessions_per_client: int | None = None,
        rate_limit: float = RATE_LIMIT,
        rate_burst: int | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not env_patterns:
            raise ValueError("env_patterns must name at least one glob, e.g. ['game:*'] or ['*']")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        if idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be positive seconds, got {idle_timeout}")
        if max_body_bytes < 1 or max_action_chars < 1:
            raise ValueError("max_body_bytes and max_action_chars must be >= 1")
        if rate_limit < 0:
            raise ValueError(f"rate_limit must be >= 0 requests/s (0: off), got {rate_limit}")
        self.env_patterns = tuple(env_patterns)
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.threads = threads or max_sessions
        self.keep_alive = keep_alive
        self.token = token or None
        self.max_body_bytes = max_body_bytes
        self.max_action_chars = max_action_chars
        self.max_sessions_per_client = max_sessions_per_client or max_sessions
        self.rate_limiter = (
            RateLimiter(rate_limit, rate_burst or max(1, math.ceil(2 * rate_limit)), clock=clock)
            if rate_limit
            else None
        )
        self.sessions: dict[str, _Session] = {}
        self._reserved = 0  # sessions being built, counted against max_sessions
        self._owned: collections.Counter[str] = collections.Counter()  # per client, + building
        self._limiter: anyio.CapacityLimiter | None = None
        self._closing: set[asyncio.Task] = set()

    # -- plumbing ------------------------------------------------------------------------
    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.threads)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)

    def admit(self, scope: Scope) -> None:
        """Check a request's token, rate limit and declared body size, before any route.

        Raises:
            _HTTPError: 401, 429 (with ``Retry-After``), 400 or 413.
        """
        headers = dict(scope["headers"])
        if self.token is not None and not bearer_token_matches(
            headers.get(b"authorization"), self.token
        ):
            logger.info("refused %s %s from %s: no valid token", *_request_line(scope))
            raise _HTTPError(
                401,
                "Unauthorized",
                "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                "(RemoteEnv(token=...) or XPGYM_SERVER_TOKEN on the client)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if self.rate_limiter is not None:
            wait = self.rate_limiter.acquire(_client_of(scope))
            if wait:
                retry_after = max(1, math.ceil(wait))
                raise _HTTPError(
                    429,
                    "RateLimited",
                    f"more than {self.rate_limiter.rate:g} requests/s (bursts of "
                    f"{self.rate_limiter.burst}) from {_client_of(scope)}; retry after "
                    f"{retry_after} s, or start the server with a larger --rate-limit",
                    headers={"Retry-After": str(retry_after)},
                )
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                raise _HTTPError(400, "BadRequest", f"bad Content-Length {length[:40]!r}")
            if int(length) > self.max_body_bytes:
                raise self._body_too_large()

    def _body_too_large(self) -> _HTTPError:
        return _HTTPError(
            413,
            "BodyTooLarge",
            f"request body over {self.max_body_bytes} bytes (--max-body-bytes)",
        )

    def capped(self, receive: Receive) -> Receive:
        """`receive` that raises 413 once the body read so far exceeds `max_body_bytes`."""
        received = 0

        async def capped_receive() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_body_bytes:
                raise self._body_too_large()
            return message

        return capped_receive

    def allows(self, env_id: str) -> bool:
        """Whether clients may create `env_id` (matches a pattern and is not ``remote:``)."""
        if env_id.startswith("remote:"):
            return False
        return any(fnmatch.fnmatchcase(env_id, p) for p in self.env_patterns)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """Run the idle reaper while the app is up; close every session on shutdown."""
        reaper = asyncio.create_task(self._reap_forever())
        try:
            yield
        finally:
            reaper.cancel()
            for session in list(self.sessions.values()):
                await self._close_session(session)

    async def _reap_forever(self) -> None:
        period = min(1.0, self.idle_timeout / 4)
        while True:
            await asyncio.sleep(period)
            deadline = time.monotonic() - self.idle_timeout
            for session in list(self.sessions.values()):
                if session.in_flight == 0 and session.last_used < deadline:
                    logger.info("closing idle session %s (%s)", session.id, session.env_id)
                    await self._close_session(session)
            if self.rate_limiter is not None:
                self.rate_limiter.prune()

    async def _close_session(self, session: _Session) -> None:
        self.sessions.pop(session.id, None)
        if session.closed:
            return
        session.closed = True
        self._release(session.owner)
        async with session.lock:  # wait for a call in flight before closing the env
            try:
                await self._in_thread(session.env.close)
            except Exception:
                logger.exception("closing session %s raised", session.id)

    async def _run(self, request: Request, fn: Callable[[_Session, dict], Any]) -> Response:
        """Run `fn(session, body)` in a thread under the session's lock; map errors."""
        try:
            session = self._session_of(request)
            if session is None:
                raise _HTTPError(
                    404,
                    "SessionNotFound",
                    f"no session {request.path_params['session_id']!r} (never created, "
                    f"deleted, or closed after {self.idle_timeout:g} s idle); create a new one",
                )
            body = await _json_body(request)
            session.in_flight += 1
            try:
                async with session.lock:
                    if session.closed:
                        raise _HTTPError(404, "SessionNotFound", f"session {session.id} closed")
                    payload = await self._in_thread(fn, session, body)
            finally:
                session.in_flight -= 1
                session.last_used = time.monotonic()
            return Response(payload, media_type="application/json")
        except Exception as exc:
            return _error_response(exc)

    def _release(self, client: str) -> None:
        """Give back one of `client`'s session slots (forget the client at zero)."""
        self._owned[client] -= 1
        if self._owned[client] <= 0:
            del self._owned[client]

    def _session_of(self, request: Request) -> _Session | None:
        """The session named in the path if the requesting client owns it, else `None`."""
        session = self.sessions.get(request.path_params["session_id"])
        if session is None or session.owner != _client_of(request.scope):
            return None
        return session

    # -- handlers ------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        limiter = self.rate_limiter
        return JSONResponse(
            {
                "status": "ok",
                "sessions": len(self.sessions),
                "max_sessions": self.max_sessions,
                "idle_timeout": self.idle_timeout,
                "env_patterns": list(self.env_patterns),
                "auth": self.token is not None,
                "limits": {
                    "max_body_bytes": self.max_body_bytes,
                    "max_action_chars": self.max_action_chars,
                    "max_sessions_per_client": self.max_sessions_per_client,
                    "rate_limit": limiter.rate if limiter else 0,
                    "rate_burst": limiter.burst if limiter else 0,
                },
            }
        )

    async def create(self, request: Request) -> Response:
        try:
            body = await _json_body(request)
            env_id = _field(body, "env_id", str, required=True)
            kwargs = _field(body, "kwargs", dict) or {}
            client = _client_of(request.scope)
            if not self.allows(env_id):
                raise _HTTPError(
                    403,
                    "EnvNotAllowed",
                    f"env id {env_id!r} is not served here; allowed: {list(self.env_patterns)}",
                )
            if len(self.sessions) + self._reserved >= self.max_sessions:
                raise _HTTPError(
                    503,
                    "TooManySessions",
                    f"the server holds its maximum of {self.max_sessions} sessions; close "
                    "sessions (DELETE /sessions/{id}) or start the server with a larger "
                    "--max-sessions",
                )
            if self._owned[client] >= self.max_sessions_per_client:
                raise _HTTPError(
                    429,
                    "TooManyClientSessions",
                    f"client {client} holds its maximum of {self.max_sessions_per_client} "
                    "sessions; close sessions (DELETE /sessions/{id}) or start the server "
                    "with a larger --max-sessions-per-client",
                )
            self._reserved += 1
            self._owned[client] += 1  # handed to the session, or given back on failure
            try:
                env = await self._in_thread(_make_env, env_id, kwargs)
            except BaseException:
                self._release(client)
                raise
            finally:
                self._reserved -= 1
            session = _Session(uuid.uuid4().hex, env_id, env, owner=client)
            self.sessions[session.id] = session
            logger.debug("created session %s (%s)", session.id, env_id)
            reply = {
                "session_id": session.id,
                "env_id": env_id,
                "metadata": env.metadata,
                "keep_alive": self.keep_alive,
            }
            return Response(to_json(reply), media_type="application/json")
        except Exception as exc:
            return _error_response(exc)

    async def delete(self, request: Request) -> Response:
        session = self._session_of(request)
        if session is not None:  # answer now; the env closes once a call in flight returns
            task = asyncio.create_task(self._close_session(session))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return JSONResponse({})

    async def reset(self, request: Request) -> Response:
        def run(session: _Session, body: dict) -> bytes:
            seed, options = _field(body, "seed", int), _field(body, "options", dict)
            obs, info = session.env.reset(seed=seed, options=options)
            session.steps_done, session.last_step = 0, None
            return to_json({"observation": obs, "info": info})

        return await self._run(request, run)

    async def step(self, request: Request) -> Response:
        def run(session: _Session, body: dict) -> bytes:
            action = _field(body, "action", str, required=True)
            seq = _field(body, "seq", int)
            if len(action) > self.max_action_chars:
                raise _HTTPError(
                    413,
                    "ActionTooLong",
                    f"field 'action' has {len(action)} characters, over the server's "
                    f"{self.max_action_chars} (--max-action-chars)",
                )
            if seq is not None:
                if seq == session.steps_done and session.last_step is not None:
                    return session.last_step  # a retry of the step that already ran
                if seq != session.steps_done + 1:
                    raise _HTTPError(
                        409,
                        "StepOutOfOrder",
                        f"step seq {seq} but {session.steps_done} steps were done since reset",
                    )
            obs, reward, terminated, truncated, info = session.env.step(action)
            reply = to_json(
                {
                    "observation": obs,
                    "reward": float(reward),
                    "terminated": bool(terminated),
                    "truncated": bool(truncated),
                    "info": info,
                }
            )
            session.steps_done += 1
            session.last_step = reply
            return reply

        return await self._run(request, run)

    async def sample_random_action(self, request: Request) -> Response:
        return await self._run(
            request, lambda s, _: to_json({"action": s.env.sample_random_action()})
        )

    async def get_state(self, request: Request) -> Response:
        return await self._run(
            request, lambda s, _: to_json({"state": s.env.get_state()}, strict=True)
        )

    async def set_state(self, request: Request) -> Response:
        def run(session: _Session, body: dict) -> bytes:
            session.env.set_state(_field(body, "state", dict, required=True))
            session.steps_done, session.last_step = 0, None
            return b"{}"

        return await self._run(request, run)

    def app(self) -> Starlette:
        """The Starlette application serving this store (see the module docstring)."""
        prefix = "/sessions/{session_id}"
        routes = [
            Route("/health", self.health, methods=["GET"]),
            Route("/sessions", self.create, methods=["POST"]),
            Route(prefix, self.delete, methods=["DELETE"]),
            Route(prefix + "/reset", self.reset, methods=["POST"]),
            Route(prefix + "/step", self.step, methods=["POST"]),
            Route(prefix + "/sample_random_action", self.sample_random_action, methods=["POST"]),
            Route(prefix + "/get_state", self.get_state, methods=["POST"]),
            Route(prefix + "/set_state", self.set_state, methods=["POST"]),
        ]
        return Starlette(
            routes=routes,
            lifespan=self.lifespan,
            middleware=[Middleware(_Gate, server=self)],
            exception_handlers={HTTPException: _routing_error},
        )


class _Gate:
    """ASGI middleware: `EnvServer.admit` runs before routing, so it covers every path."""

    def __init__(self, app: ASGIApp, server: EnvServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        try:
            self.server.admit(scope)
        except _HTTPError as exc:
            await _error_response(exc)(scope, receive, send)
            return
        await self.app(scope, self.server.capped(receive), send)


async def _routing_error(request: Request, exc: Exception) -> Response:
    """Unknown paths (404) and methods (405) get the JSON error body too."""
    assert isinstance(exc, HTTPException)
    name = http.HTTPStatus(exc.status_code).phrase.replace(" ", "")
    return _error_response(_HTTPError(exc.status_code, name, exc.detail, headers=exc.headers))


def _request_line(scope: Scope) -> tuple[str, str, str]:
    return scope["method"], scope["path"], _client_of(scope)


def _make_env(env_id: str, kwargs: dict[str, Any]) -> Env:
    try:
        env = make(env_id, **kwargs)
    except (TypeError, ValueError) as exc:
        raise _HTTPError(400, type(exc).__name__, str(exc)) from exc
    if not isinstance(env, Env):
        env.close()
        raise _HTTPError(
            400, "NotSupported", f"{env_id!r} is a multi-agent env; only Env can be served"
        )
    return env


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise _HTTPError(400, "BadRequest", f"request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise _HTTPError(400, "BadRequest", "request body must be a JSON object")
    return body


def _error_response(exc: BaseException) -> Response:
    err = _error_from(exc)
    if err.status >= 500:
        logger.warning("env call failed: %s: %s", err.type_name, err.message)
    body = {"error": {"type": err.type_name, "message": err.message, "traceback": err.tb}}
    return Response(
        to_json(body), status_code=err.status, headers=err.headers, media_type="application/json"
    )


def create_app(env_patterns: Sequence[str], **options: Any) -> Starlette:
    """A Starlette app serving envs whose ids match `env_patterns` (see `EnvServer`)."""
    return EnvServer(env_patterns, **options).app()


def _uvicorn_config(app: Starlette, keep_alive: float, **config: Any) -> Any:
    import uvicorn

    return uvicorn.Config(
        app,
        timeout_keep_alive=math.ceil(keep_alive),
        log_level=config.pop("log_level", "warning"),
        backlog=config.pop("backlog", 4096),
        proxy_headers=False,  # the client is the peer address: forwarded headers can lie
        **config,
    )


def serve(
    env_patterns: Sequence[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    **options: Any,
) -> None:
    """Serve envs over HTTP until interrupted (blocking). `options` go to `EnvServer`.

    Raises:
        ValueError: `host` is not loopback and no ``token`` was given (`check_bind`).
    """
    import uvicorn

    server = EnvServer(env_patterns, **options)
    check_bind(host, server.token)
    config = _uvicorn_config(
        server.app(), server.keep_alive, host=host, port=port, log_level=log_level
    )
    uvicorn.Server(config).run()


class BackgroundServer:
    """An env server on a daemon thread, for tests, notebooks and benchmarks.

    ``with BackgroundServer(["game:*"]) as srv: make(f"remote:{srv.url}/game:...")``.
    Binds ``host:port`` (port 0 picks a free one) before `__enter__` returns.

    Args:
        env_patterns: As for `EnvServer`.
        host, port: Where to listen (default 127.0.0.1, a free port); a non-loopback host
            needs a ``token`` (`check_bind`).
        **options: `EnvServer` options (``token``, ``max_sessions``, ``idle_timeout``, ...).
    """

    def __init__(
        self, env_patterns: Sequence[str], *, host: str = "127.0.0.1", port: int = 0, **options: Any
    ) -> None:
        import uvicorn

        self.store = EnvServer(env_patterns, **options)
        check_bind(host, self.store.token)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host, self.port = self._sock.getsockname()[:2]
        self.url = f"http://{self.host}:{self.port}"
        config = _uvicorn_config(self.store.app(), self.store.keep_alive)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def start(self, timeout: float = 10.0) -> BackgroundServer:
        """Start serving; return once the server accepts requests."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"env server on {self.url} did not start in {timeout} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving (open sessions are closed) and join the thread."""
        self._server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
