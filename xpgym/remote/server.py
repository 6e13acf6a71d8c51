"""HTTP/JSON server that hosts xpgym envs in sessions (``python -m xpgym serve``).

The same app also serves every allowed env id in OpenEnv's protocol at
``/openenv/<env id>`` (WebSocket sessions at ``/openenv/<env id>/ws``; see
`xpgym.remote.openenv_server`), over the same sessions, token and limits.

Access (see `xpgym.remote.guard`): with a ``token``, every route (``/health`` too, unknown
paths, and WebSocket handshakes) answers 401 unless the request carries ``Authorization:
Bearer <token>``; without one the server only binds to loopback. Every request that passed
the token check is then held to its client's rate limit (429 with ``Retry-After``) and the
body size limit (413). A refused WebSocket handshake is never accepted: it gets the same
HTTP error response. A client is the request's remote address; its sessions are its own:
another client gets 404 for them, as for an id that never existed (ids are random uuid4s,
122 bits).

Protocol (all bodies are JSON; every error body is
``{"error": {"type": "<ExceptionType>", "message": "...", "traceback": "..."}, "detail":
"..."}``, ``detail`` repeating the message in FastAPI's shape for OpenEnv and ORS clients):

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

import http
import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from xpgym.remote.guard import check_bind
from xpgym.remote.openenv_server import openenv_routes
from xpgym.remote.ors_server import ors_routes
from xpgym.remote.sessions import (
    ServerError,
    Session,
    SessionStore,
    client_of,
    error_from,
    json_field,
    read_json_body,
    to_json,
)

__all__ = ["BackgroundServer", "EnvServer", "create_app", "serve"]

logger = logging.getLogger(__name__)


class EnvServer(SessionStore):
    """A `SessionStore` answering xpgym's own protocol (the module docstring), with the
    OpenEnv and ORS front ends over the same sessions; arguments as for `SessionStore`."""

    async def _run(self, request: Request, fn: Callable[[Session, dict], Any]) -> Response:
        """Run `fn(session, body)` for a native session route; map errors to replies."""
        try:
            session = self.session_for(request.path_params["session_id"], client_of(request.scope))
            if session is None:
                raise ServerError(
                    404,
                    "SessionNotFound",
                    f"no session {request.path_params['session_id']!r} (never created, "
                    f"deleted, or closed after {self.idle_timeout:g} s idle); create a new one",
                )
            body = await read_json_body(request)
            payload = await self.call(session, lambda s: fn(s, body))
            return Response(payload, media_type="application/json")
        except Exception as exc:
            return _error_response(exc)

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
            body = await read_json_body(request)
            env_id = json_field(body, "env_id", str, required=True)
            kwargs = json_field(body, "kwargs", dict) or {}
            session = await self.open_session(env_id, kwargs, client_of(request.scope))
            reply = {
                "session_id": session.id,
                "env_id": env_id,
                "metadata": session.env.metadata,
                "keep_alive": self.keep_alive,
            }
            return Response(to_json(reply), media_type="application/json")
        except Exception as exc:
            return _error_response(exc)

    async def delete(self, request: Request) -> Response:
        session = self.session_for(request.path_params["session_id"], client_of(request.scope))
        if session is not None:  # answer now; the env closes once a call in flight returns
            self.close_soon(session)
        return JSONResponse({})

    async def reset(self, request: Request) -> Response:
        def run(session: Session, body: dict) -> bytes:
            seed, options = json_field(body, "seed", int), json_field(body, "options", dict)
            obs, info = session.env.reset(seed=seed, options=options)
            session.steps_done, session.last_step = 0, None
            return to_json({"observation": obs, "info": info})

        return await self._run(request, run)

    async def step(self, request: Request) -> Response:
        def run(session: Session, body: dict) -> bytes:
            action = json_field(body, "action", str, required=True)
            seq = json_field(body, "seq", int)
            self.check_action(action)
            if seq is not None:
                if seq == session.steps_done and session.last_step is not None:
                    return session.last_step  # a retry of the step that already ran
                if seq != session.steps_done + 1:
                    raise ServerError(
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
        def run(session: Session, body: dict) -> bytes:
            session.env.set_state(json_field(body, "state", dict, required=True))
            session.steps_done, session.last_step = 0, None
            return b"{}"

        return await self._run(request, run)

    def app(self) -> Starlette:
        """The Starlette application serving this store (see the module docstring), with
        the OpenEnv (`xpgym.remote.openenv_server`) and ORS (`xpgym.remote.ors_server`)
        front ends over the same sessions, token and limits."""
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
            *openenv_routes(self),
            *ors_routes(self),
        ]
        return Starlette(
            routes=routes,
            lifespan=self.lifespan,
            middleware=[Middleware(_Gate, server=self)],
            exception_handlers={HTTPException: _routing_error},
        )


class _Gate:
    """ASGI middleware: `EnvServer.admit` runs before routing, so it covers every path.

    HTTP requests and WebSocket handshakes alike: a refused handshake is never accepted; it
    gets the same HTTP error response as a request (through the ASGI WebSocket denial
    response, which uvicorn supports) or, on a server without that extension, a close with
    code 1008 (policy violation; the client sees HTTP 403).
    """

    def __init__(self, app: ASGIApp, server: EnvServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        try:
            self.server.admit(scope)
        except ServerError as exc:
            if scope["type"] == "http":
                await _error_response(exc)(scope, receive, send)
            else:
                await _refuse_handshake(WebSocket(scope, receive, send), exc)
            return
        if scope["type"] == "http":
            receive = self.server.capped(receive)
        await self.app(scope, receive, send)


async def _refuse_handshake(websocket: WebSocket, exc: ServerError) -> None:
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(_error_response(exc))
    else:
        await websocket.close(code=1008, reason=f"{exc.status} {exc.type_name}")


async def _routing_error(request: Request, exc: Exception) -> Response:
    """Unknown paths (404) and methods (405) get the JSON error body too."""
    assert isinstance(exc, HTTPException)
    name = http.HTTPStatus(exc.status_code).phrase.replace(" ", "")
    return _error_response(ServerError(exc.status_code, name, exc.detail, headers=exc.headers))


def _error_response(exc: BaseException) -> Response:
    err = error_from(exc)
    if err.status >= 500:
        logger.warning("env call failed: %s: %s", err.type_name, err.message)
    body = {
        "error": {"type": err.type_name, "message": err.message, "traceback": err.tb},
        "detail": err.message,  # FastAPI's shape, which OpenEnv's and ORS's clients read
    }
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
        # frames are small JSON: compressing each costs more CPU than it saves on loopback
        ws_per_message_deflate=False,
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
