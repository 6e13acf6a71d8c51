"""HTTP/JSON server that hosts xpgym envs in sessions (``python -m xpgym serve``).

Protocol (all bodies are JSON; every error body is
``{"error": {"type": "<ExceptionType>", "message": "...", "traceback": "..."}}``):

==========================================  =============================================
Request                                     Response
==========================================  =============================================
``GET /health``                             ``{status, sessions, max_sessions,
                                            idle_timeout, env_patterns}``
``POST /sessions {env_id, kwargs}``         ``{session_id, env_id, metadata,
                                            keep_alive}``; 403 if `env_id` does not match
                                            ``--env``, 404 unknown id, 400 bad kwargs,
                                            503 when ``max_sessions`` are open
``POST /sessions/{id}/reset {seed, options}``  ``{observation, info}``
``POST /sessions/{id}/step {action, seq}``  ``{observation, reward, terminated,
                                            truncated, info}``
``POST /sessions/{id}/sample_random_action``  ``{action}``
``POST /sessions/{id}/get_state``           ``{state}``
``POST /sessions/{id}/set_state {state}``   ``{}``
``DELETE /sessions/{id}``                   ``{}`` (also for an unknown id: idempotent)
==========================================  =============================================

Status codes: 400 malformed request or bad env kwargs, 403 env id not
allowed, 404 unknown env id or session (never created, deleted, or reaped after
``idle_timeout`` seconds without a request), 409 lifecycle errors (`ResetNeededError`,
`EpisodeFinishedError`, a step ``seq`` out of order), 500 any other exception raised by the
env, 503 session limit reached.

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
import contextlib
import fnmatch
import json
import logging
import math
import socket
import threading
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from xpgym.core.env import Env, EpisodeFinishedError, ResetNeededError
from xpgym.core.registry import UnknownEnvError, make

__all__ = ["BackgroundServer", "EnvServer", "create_app", "serve", "to_json"]

logger = logging.getLogger(__name__)


class _HTTPError(Exception):
    """An error with an HTTP status, turned into a JSON error body."""

    def __init__(self, status: int, type_name: str, message: str, tb: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.type_name = type_name
        self.message = message
        self.tb = tb


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


@dataclass(eq=False)
class _Session:
    id: str
    env_id: str
    env: Env
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
    """

    def __init__(
        self,
        env_patterns: Sequence[str],
        *,
        max_sessions: int = 256,
        idle_timeout: float = 300.0,
        threads: int | None = None,
        keep_alive: float = 75.0,
    ) -> None:
        if not env_patterns:
            raise ValueError("env_patterns must name at least one glob, e.g. ['game:*'] or ['*']")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be >= 1, got {max_sessions}")
        if idle_timeout <= 0:
            raise ValueError(f"idle_timeout must be positive seconds, got {idle_timeout}")
        self.env_patterns = tuple(env_patterns)
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.threads = threads or max_sessions
        self.keep_alive = keep_alive
        self.sessions: dict[str, _Session] = {}
        self._reserved = 0  # sessions being built, counted against max_sessions
        self._limiter: anyio.CapacityLimiter | None = None
        self._closing: set[asyncio.Task] = set()

    # -- plumbing ------------------------------------------------------------------------
    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.threads)
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)

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

    async def _close_session(self, session: _Session) -> None:
        self.sessions.pop(session.id, None)
        if session.closed:
            return
        session.closed = True
        async with session.lock:  # wait for a call in flight before closing the env
            try:
                await self._in_thread(session.env.close)
            except Exception:
                logger.exception("closing session %s raised", session.id)

    async def _run(self, request: Request, fn: Callable[[_Session, dict], Any]) -> Response:
        """Run `fn(session, body)` in a thread under the session's lock; map errors."""
        try:
            session = self.sessions.get(request.path_params["session_id"])
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

    # -- handlers ------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "sessions": len(self.sessions),
                "max_sessions": self.max_sessions,
                "idle_timeout": self.idle_timeout,
                "env_patterns": list(self.env_patterns),
            }
        )

    async def create(self, request: Request) -> Response:
        try:
            body = await _json_body(request)
            env_id, kwargs = body.get("env_id"), body.get("kwargs") or {}
            if not isinstance(env_id, str) or not isinstance(kwargs, dict):
                raise _HTTPError(
                    400, "BadRequest", "body must be {env_id: str, kwargs: object (optional)}"
                )
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
            self._reserved += 1
            try:
                env = await self._in_thread(_make_env, env_id, kwargs)
            finally:
                self._reserved -= 1
            session = _Session(uuid.uuid4().hex, env_id, env)
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
        session = self.sessions.get(request.path_params["session_id"])
        if session is not None:  # answer now; the env closes once a call in flight returns
            task = asyncio.create_task(self._close_session(session))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return JSONResponse({})

    async def reset(self, request: Request) -> Response:
        def run(session: _Session, body: dict) -> bytes:
            seed, options = body.get("seed"), body.get("options")
            obs, info = session.env.reset(seed=seed, options=options)
            session.steps_done, session.last_step = 0, None
            return to_json({"observation": obs, "info": info})

        return await self._run(request, run)

    async def step(self, request: Request) -> Response:
        def run(session: _Session, body: dict) -> bytes:
            action, seq = body.get("action"), body.get("seq")
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
            if not isinstance(body.get("state"), dict):
                raise _HTTPError(400, "BadRequest", "body must be {state: object}")
            session.env.set_state(body["state"])
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
        return Starlette(routes=routes, lifespan=self.lifespan)


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
    except ValueError as exc:
        raise _HTTPError(400, "BadRequest", f"request body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise _HTTPError(400, "BadRequest", "request body must be a JSON object")
    return body


def _error_response(exc: BaseException) -> Response:
    err = _error_from(exc)
    if err.status >= 500:
        logger.warning("env call failed: %s: %s", err.type_name, err.message)
    body = {"error": {"type": err.type_name, "message": err.message, "traceback": err.tb}}
    return Response(to_json(body), status_code=err.status, media_type="application/json")


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
    """Serve envs over HTTP until interrupted (blocking). `options` go to `EnvServer`."""
    import uvicorn

    server = EnvServer(env_patterns, **options)
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
        host, port: Where to listen (default 127.0.0.1, a free port).
        **options: `EnvServer` options (``max_sessions``, ``idle_timeout``, ...).
    """

    def __init__(
        self, env_patterns: Sequence[str], *, host: str = "127.0.0.1", port: int = 0, **options: Any
    ) -> None:
        import uvicorn

        self.store = EnvServer(env_patterns, **options)
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
