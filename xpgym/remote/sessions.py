"""The session store behind every env-server protocol: limits, access, env calls.

`SessionStore` owns the sessions (one env each), the limits (``max_sessions``, per client,
idle reaping), the access check (`SessionStore.admit`: bearer token, rate limit, body size)
and the one way any front end touches an env (`SessionStore.call`: one call per session at a
time, in arrival order, on a worker thread). The protocols are front ends over it:
`xpgym.remote.server` (xpgym's own, and the app that mounts the others),
`xpgym.remote.openenv_server` (OpenEnv) and `xpgym.remote.ors_server` (ORS). Errors are
`ServerError` (an HTTP status and a type name) that each front end maps onto its own reply.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import fnmatch
import json
import logging
import math
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.types import Message, Receive, Scope

from xpgym.core.env import Env, EpisodeFinishedError, ResetNeededError
from xpgym.core.registry import UnknownEnvError, make
from xpgym.remote.guard import (
    MAX_ACTION_CHARS,
    MAX_BODY_BYTES,
    RATE_LIMIT,
    RateLimiter,
    api_key_matches,
    bearer_token_matches,
)

__all__ = [
    "ServerError",
    "Session",
    "SessionStore",
    "client_of",
    "error_from",
    "json_field",
    "read_json_body",
    "to_json",
]

logger = logging.getLogger("xpgym.remote.server")


class ServerError(Exception):
    """An error with an HTTP status and a type name, turned into each protocol's error reply.

    The native protocol sends ``{"error": {"type", "message", "traceback"}}`` with `status`;
    the OpenEnv and ORS front ends map `status` and `type_name` onto their own error shapes.
    """

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


def to_json(value: Any, *, strict: bool = False, compact: bool = False) -> bytes:
    """Encode `value` as UTF-8 JSON (see the module docstring for what cannot cross).

    Args:
        value: Any value; dict keys that are not str/int/float/bool/None raise `TypeError`.
        strict: Raise `TypeError` on values JSON cannot hold instead of sending their repr.
        compact: No spaces after ``,`` and ``:``, so every space is inside a string.
    """
    separators = (",", ":") if compact else None
    return json.dumps(
        value, default=_strict if strict else _lenient, separators=separators
    ).encode()


def error_from(exc: BaseException) -> ServerError:
    if isinstance(exc, ServerError):
        return exc
    if isinstance(exc, (ResetNeededError, EpisodeFinishedError)):
        status = 409
    elif isinstance(exc, UnknownEnvError):
        status = 404
    else:
        status = 500
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return ServerError(status, type(exc).__name__, str(exc), tb)


_JSON_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "a boolean",
    list: "an array",
    dict: "an object",
    type(None): "null",
}


def json_field(body: dict[str, Any], name: str, kind: type, *, required: bool = False) -> Any:
    """``body[name]`` if it has JSON type `kind` (or is absent/null and not `required`).

    Raises:
        ServerError: 422 ``InvalidField`` naming the field, the expected and the sent type.
    """
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = _JSON_TYPE_NAMES[kind] + ("" if required else " or null")
        sent = _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
        raise ServerError(422, "InvalidField", f"field {name!r} must be {expected}, got {sent}")
    return value


def client_of(scope: Scope) -> str:
    """The client a request counts against: its remote address (see `xpgym.remote.guard`)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


@dataclass(eq=False)
class Session:
    """One client's env on the server, whatever protocol opened it.

    `lock` orders the calls to it (`EnvServer.call`); `steps_done` and `last_step` are the
    native protocol's step ``seq`` bookkeeping; `extra` holds a front end's own per-session
    state (OpenEnv's episode counters, ORS's task), keyed by the front end's name.
    """

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
    extra: dict[str, Any] = field(default_factory=dict)


class SessionStore:
    """The sessions of an env server and the limits they are held to (see the module doc).

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
        self.sessions: dict[str, Session] = {}
        self._reserved = 0  # sessions being built, counted against max_sessions
        self._owned: collections.Counter[str] = collections.Counter()  # per client, + building
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._closing: set[asyncio.Task] = set()

    # -- plumbing ------------------------------------------------------------------------
    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on one of `threads` worker threads. A cancelled caller (its client
        went away) still waits for the call to return, so a session's lock is never
        released while its env is busy."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                self.threads, thread_name_prefix="xpgym-env"
            )
        future = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            while not future.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([future])
            raise

    def admit(self, scope: Scope) -> None:
        """Check a request's token (``Authorization: Bearer`` or ``X-API-Key``), rate limit
        and declared body size, before any route.

        Raises:
            ServerError: 401, 429 (with ``Retry-After``), 400 or 413.
        """
        headers = dict(scope["headers"])
        if self.token is not None and not (
            bearer_token_matches(headers.get(b"authorization"), self.token)
            or api_key_matches(headers.get(b"x-api-key"), self.token)
        ):
            logger.info("refused %s %s from %s: no valid token", *_request_line(scope))
            raise ServerError(
                401,
                "Unauthorized",
                "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                "(RemoteEnv(token=...) or XPGYM_SERVER_TOKEN on the client) or "
                "'X-API-Key: <token>' (ORS clients: ORS(api_key=...) or ORS_API_KEY)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        self.check_rate(client_of(scope))
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                raise ServerError(400, "BadRequest", f"bad Content-Length {length[:40]!r}")
            self.check_body_size(int(length))

    def check_rate(self, client: str) -> None:
        """Count one request of `client` against the rate limit (`admit` does it for each
        HTTP request and WebSocket handshake; a WebSocket front end, for each message).

        Raises:
            ServerError: 429 ``RateLimited`` with ``Retry-After`` in whole seconds.
        """
        if self.rate_limiter is None:
            return
        wait = self.rate_limiter.acquire(client)
        if wait:
            retry_after = max(1, math.ceil(wait))
            raise ServerError(
                429,
                "RateLimited",
                f"more than {self.rate_limiter.rate:g} requests/s (bursts of "
                f"{self.rate_limiter.burst}) from {client}; retry after "
                f"{retry_after} s, or start the server with a larger --rate-limit",
                headers={"Retry-After": str(retry_after)},
            )

    def check_body_size(self, size: int) -> None:
        """Refuse a request body or message of `size` bytes over `max_body_bytes`.

        Raises:
            ServerError: 413 ``BodyTooLarge``.
        """
        if size > self.max_body_bytes:
            raise ServerError(
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
            self.check_body_size(received)
            return message

        return capped_receive

    def allows(self, env_id: str) -> bool:
        """Whether clients may create `env_id` (matches a pattern and is not ``remote:``)."""
        if env_id.startswith("remote:"):
            return False
        return any(fnmatch.fnmatchcase(env_id, p) for p in self.env_patterns)

    def check_allowed(self, env_id: str) -> None:
        """Refuse an env id clients may not create.

        Raises:
            ServerError: 403 ``EnvNotAllowed`` naming the allowed patterns.
        """
        if not self.allows(env_id):
            raise ServerError(
                403,
                "EnvNotAllowed",
                f"env id {env_id!r} is not served here; allowed: {list(self.env_patterns)}",
            )

    def check_action(self, action: str) -> None:
        """Refuse an action longer than `max_action_chars`.

        Raises:
            ServerError: 413 ``ActionTooLong``.
        """
        if len(action) > self.max_action_chars:
            raise ServerError(
                413,
                "ActionTooLong",
                f"the action has {len(action)} characters, over the server's "
                f"{self.max_action_chars} (--max-action-chars)",
            )

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """Run the idle reaper while the app is up; close every session on shutdown."""
        reaper = asyncio.create_task(self._reap_forever())
        try:
            yield
        finally:
            reaper.cancel()
            for session in list(self.sessions.values()):
                await self.close_session(session)
            if self._executor is not None:
                self._executor.shutdown(wait=False)
                self._executor = None

    async def _reap_forever(self) -> None:
        period = min(1.0, self.idle_timeout / 4)
        while True:
            await asyncio.sleep(period)
            deadline = time.monotonic() - self.idle_timeout
            for session in list(self.sessions.values()):
                if session.in_flight == 0 and session.last_used < deadline:
                    logger.info("closing idle session %s (%s)", session.id, session.env_id)
                    await self.close_session(session)
            if self.rate_limiter is not None:
                self.rate_limiter.prune()

    async def close_session(self, session: Session) -> None:
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

    async def call(self, session: Session, fn: Callable[[Session], Any]) -> Any:
        """Run `fn(session)` on a worker thread, after the session's calls before it.

        The protocol-neutral way every front end (native, OpenEnv, ORS) touches an env: one
        call per session at a time, in arrival order; the session is not idle while it runs.

        Raises:
            ServerError: 404 ``SessionNotFound`` if the session was closed meanwhile; any
                exception `fn` raises passes through.
        """
        session.in_flight += 1
        try:
            async with session.lock:
                if session.closed:
                    raise ServerError(404, "SessionNotFound", f"session {session.id} closed")
                return await self._in_thread(fn, session)
        finally:
            session.in_flight -= 1
            session.last_used = time.monotonic()

    def _release(self, client: str) -> None:
        """Give back one of `client`'s session slots (forget the client at zero)."""
        self._owned[client] -= 1
        if self._owned[client] <= 0:
            del self._owned[client]

    def session_for(self, session_id: str, client: str) -> Session | None:
        """The open session `session_id` if `client` owns it, else `None` (also for another
        client's session: it cannot tell those apart from ids that never existed)."""
        session = self.sessions.get(session_id)
        if session is None or session.owner != client:
            return None
        return session

    async def open_session(self, env_id: str, kwargs: Mapping[str, Any], client: str) -> Session:
        """Build `env_id` with `kwargs` for `client` under every limit of this server.

        Raises:
            ServerError: 403 ``EnvNotAllowed``, 503 ``TooManySessions``, 429
                ``TooManyClientSessions``, 400 bad kwargs or a multi-agent env; 404
                (`UnknownEnvError`) and any other exception of the env's constructor pass
                through.
        """
        self.check_allowed(env_id)
        if len(self.sessions) + self._reserved >= self.max_sessions:
            raise ServerError(
                503,
                "TooManySessions",
                f"the server holds its maximum of {self.max_sessions} sessions; close "
                "sessions (DELETE /sessions/{id}) or start the server with a larger "
                "--max-sessions",
            )
        if self._owned[client] >= self.max_sessions_per_client:
            raise ServerError(
                429,
                "TooManyClientSessions",
                f"client {client} holds its maximum of {self.max_sessions_per_client} "
                "sessions; close sessions (DELETE /sessions/{id}) or start the server "
                "with a larger --max-sessions-per-client",
            )
        self._reserved += 1
        self._owned[client] += 1  # handed to the session, or given back on failure
        try:
            env = await self._in_thread(_make_env, env_id, dict(kwargs))
        except BaseException:
            self._release(client)
            raise
        finally:
            self._reserved -= 1
        session = Session(uuid.uuid4().hex, env_id, env, owner=client)
        self.sessions[session.id] = session
        logger.debug("created session %s (%s)", session.id, env_id)
        return session

    def close_soon(self, session: Session) -> None:
        """Close `session` in the background: its env closes once a call in flight returns."""
        task = asyncio.create_task(self.close_session(session))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


def _request_line(scope: Scope) -> tuple[str, str, str]:
    method = scope.get("method", "WEBSOCKET")  # a WebSocket handshake's scope has no method
    return method, scope["path"], client_of(scope)


def _make_env(env_id: str, kwargs: dict[str, Any]) -> Env:
    try:
        env = make(env_id, **kwargs)
    except (TypeError, ValueError) as exc:
        raise ServerError(400, type(exc).__name__, str(exc)) from exc
    if not isinstance(env, Env):
        env.close()
        raise ServerError(
            400, "NotSupported", f"{env_id!r} is a multi-agent env; only Env can be served"
        )
    return env


async def read_json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        raise ServerError(400, "BadRequest", f"request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ServerError(400, "BadRequest", "request body must be a JSON object")
    return body
